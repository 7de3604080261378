-- +goose Up
-- closed: the candle's final state is stored. The writer knew it final: a
-- stream's closing push (Binance's "x": true), or a read after the candle
-- ended (store.UpsertChangedCandles). Only the scored series are marked;
-- rows from before this column, open candles and display-only series are
-- false. The rescoring rule rescores a candle that has just ended at once
-- only once it is closed, so a close is never scored on a state stored
-- before the final one (the stream's last open write), then again on the
-- final. A constant default: no rewrite, a moment's lock.
ALTER TABLE candles ADD COLUMN closed boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE candles DROP COLUMN closed;
