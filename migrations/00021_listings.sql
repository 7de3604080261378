-- +goose Up
-- The instruments each combination's feed lists, and when one stopped
-- being listed (a stock no longer active at its provider). A delisted
-- asset leaves the screener (its feed no longer returns it) and the
-- analytics list and top setups (filtered on this table), but keeps its
-- candles, reports and history. An asset none of whose combinations lists
-- it any more is delisted; one with no row at all (a market whose feed
-- has a fixed universe) is listed.
CREATE TABLE listings (
    market       text NOT NULL,
    exchange     text NOT NULL,
    instrument   text NOT NULL,
    symbol       text NOT NULL,
    listed_at    timestamptz NOT NULL,
    delisted_at  timestamptz,
    PRIMARY KEY (market, exchange, instrument, symbol)
);

-- The delisted assets of a market, for the analytics list's filter.
CREATE INDEX listings_delisted ON listings (market, symbol) WHERE delisted_at IS NOT NULL;

-- +goose Down
DROP TABLE listings;
