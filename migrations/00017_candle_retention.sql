-- +goose NO TRANSACTION
-- +goose Up
-- Candle retention deletes, timeframe by timeframe, the candles that opened
-- before a cut-off, in small batches across every series. The primary key
-- leads with the series (market, exchange, symbol), so without this index
-- each batch would read the whole table. Built CONCURRENTLY: the table is
-- the largest one and ingest writes it every second; a plain build would
-- block those writes for the length of the build.
CREATE INDEX CONCURRENTLY IF NOT EXISTS candles_timeframe_open_time ON candles (timeframe, open_time);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS candles_timeframe_open_time;
