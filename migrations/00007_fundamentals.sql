-- +goose Up
-- The latest fundamental inputs of each asset (feeds.FundamentalInputs:
-- funding rate, open interest, P/E, rate differentials, ...), keyed by the
-- Fundamental* names; the scorer reads them.
CREATE TABLE fundamentals (
    market      text NOT NULL,
    symbol      text NOT NULL,
    inputs      jsonb NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (market, symbol)
);

-- +goose Down
DROP TABLE fundamentals;
