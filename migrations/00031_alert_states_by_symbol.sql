-- +goose NO TRANSACTION
-- +goose Up
-- A save reads the alert states of its assets by symbol: one range of this
-- index per asset, instead of a primary-key probe for every alert that
-- could apply to every asset (a million probes at a close of 2,000 assets
-- with 10,000 alerts). Built CONCURRENTLY: the states are written at
-- every save, and the table grows with alerts times assets.
CREATE INDEX CONCURRENTLY IF NOT EXISTS alert_states_symbol ON alert_states (symbol);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS alert_states_symbol;
