-- +goose Up
-- Compact candle storage (store/candleblocks.go, docs/candle-storage.md).
-- Candles older than their timeframe's hot window leave the candles table
-- for one row per series and period (a UTC day for 1m and 5m, a month for
-- 15m to 1d, a year for 1w) holding them packed (store.packCandles):
-- about 14 bytes a candle instead of a 227-byte row with its index entries.
-- The candles table stays as it is: ingest writes it every second, and a
-- candle written there again for an open time a block holds (a repair)
-- wins over the block's until the mover packs it in. Every reader reads
-- both tables in one statement (one snapshot), and the mover writes a
-- block and deletes the rows it packed in one transaction, so a reader
-- sees each candle once, before or after the move.
CREATE TABLE candle_blocks (
    market      text NOT NULL,
    exchange    text NOT NULL,
    symbol      text NOT NULL,
    timeframe   text NOT NULL,
    -- the start of the block's period
    block_start timestamptz NOT NULL,
    -- the newest open time in the block, and how many candles it holds
    last_time   timestamptz NOT NULL,
    n           integer NOT NULL CHECK (n > 0),
    packed      bytea NOT NULL,
    PRIMARY KEY (market, exchange, symbol, timeframe, block_start)
);
-- The packing leaves nothing for pglz to find: store the values as they
-- are (out of line past 2 kB) and spare the writer a compression attempt.
ALTER TABLE candle_blocks ALTER COLUMN packed SET STORAGE EXTERNAL;
-- Retention deletes, timeframe by timeframe, the blocks whose newest
-- candle is past the cut-off.
CREATE INDEX candle_blocks_timeframe_last_time ON candle_blocks (timeframe, last_time);

-- +goose Down
DROP TABLE candle_blocks;
