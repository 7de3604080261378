-- +goose Up
-- destructive-change-reviewed: the trigger dropped is created again in the same transaction, on the same function, with a condition the previous release never meets (it sets no marketd.moving_candles); no binary names the trigger.
-- Moving hot candles into their blocks (store.CompactSeries) changes no
-- candle a reader sees: each is in its row before the mover's commit and
-- in its block after, with the same values. So a move is not a change of
-- its series and must not move the series' version: every move sent each
-- scoring worker back to a full read of the series' 500 newest candles
-- (store.CandleCache) and the statistics back to the series' whole history
-- (store.CandleSeriesVersions). The mover sets marketd.moving_candles for
-- its transaction (SET LOCAL), and the DELETE trigger does not fire then;
-- any other delete (retention, an operator's) still counts as deep.
-- Replacing the trigger takes a SHARE ROW EXCLUSIVE lock on candles for
-- the moment of the swap (writers wait for it, readers do not).
DROP TRIGGER candles_versions_delete ON candles;
CREATE TRIGGER candles_versions_delete AFTER DELETE ON candles
    REFERENCING OLD TABLE AS previous_rows FOR EACH STATEMENT
    WHEN (current_setting('marketd.moving_candles', true) IS DISTINCT FROM 'on')
    EXECUTE FUNCTION candle_series_changed();

-- +goose Down
DROP TRIGGER candles_versions_delete ON candles;
CREATE TRIGGER candles_versions_delete AFTER DELETE ON candles
    REFERENCING OLD TABLE AS previous_rows FOR EACH STATEMENT EXECUTE FUNCTION candle_series_changed();
