-- +goose Up
-- What a scoring worker needs to keep the candles it read and trust them
-- later (store.CandleCache): per candle series of a scored timeframe, the
-- newest open time it has had and the recent "deep" changes, those that
-- touched a candle older than the series' newest one, counted by a
-- version.
--
-- A worker keeps the newest 500 candles of a series with the version it
-- read them at. Next time it reads, in one statement, the version and only
-- the candles from its kept newest one on (the open candle that moved, the
-- candle that closed, the ones opened since). The kept older candles are
-- still Postgres's exactly when no deep change since its version touched
-- them: a change that only moves the newest candle, or adds newer ones,
-- is the "tail" the worker re-reads anyway. Anything else (a correction of
-- an older candle, a backfill, a delete, a deep change dropped from the
-- short list) sends it back to a full read. A TRUNCATE gives candles a
-- new relfilenode, which the reader compares (store.CandleCache).
--
-- Triggers, not the application's statements, keep the versions, so every
-- writer counts: the previous release during a rolling upgrade, the REST
-- and stream ingest of any process, an operator's SQL. A writer of a
-- versioned series takes one advisory lock (per schema) before it reads
-- or writes version rows and holds it until it commits, so the changes
-- are judged in commit order, each against the newest candle as committed
-- before it (a writer that moves the then-newest candle while another adds
-- a newer one is judged deep if it commits second), and an upsert's two
-- triggers (INSERT, then UPDATE) of two concurrent statements cannot lock
-- rows in opposite orders. A change of the newest candle alone writes
-- nothing: the stream's open-candle writes only read the version rows. A
-- reader sees a version and the candles it describes in one snapshot.
-- Only the scored timeframes are versioned (store.candleVersioned lists
-- the same ones): a 1m write costs nothing.
CREATE TABLE candle_series_versions (
    market        text NOT NULL,
    exchange      text NOT NULL,
    symbol        text NOT NULL,
    timeframe     text NOT NULL,
    -- how many deep changes the series has had since it was first seen
    version       bigint NOT NULL,
    -- the newest open time the series has had (a high-water mark)
    newest        timestamptz NOT NULL,
    -- the last 8 deep changes: the version each made and the oldest and
    -- newest open time it touched; deep_dropped is the version of the
    -- newest one dropped from the list (0: none)
    deep_versions bigint[] NOT NULL,
    deep_from     timestamptz[] NOT NULL,
    deep_to       timestamptz[] NOT NULL,
    deep_dropped  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (market, exchange, symbol, timeframe)
);

-- +goose StatementBegin
CREATE FUNCTION candle_series_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ms text[]; es text[]; ss text[]; tfs text[]; los timestamptz[]; his timestamptz[];
BEGIN
    -- The changed series of the scored timeframes, with the oldest and
    -- newest open time changed (an UPDATE: before and after).
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(market), array_agg(exchange), array_agg(symbol), array_agg(timeframe), array_agg(lo), array_agg(hi)
        INTO ms, es, ss, tfs, los, his
        FROM (SELECT market, exchange, symbol, timeframe, min(open_time) AS lo, max(open_time) AS hi FROM changed_rows
            WHERE timeframe IN ('15m', '1h', '4h', '1d') GROUP BY 1, 2, 3, 4) s;
    ELSIF TG_OP = 'UPDATE' THEN
        SELECT array_agg(market), array_agg(exchange), array_agg(symbol), array_agg(timeframe), array_agg(lo), array_agg(hi)
        INTO ms, es, ss, tfs, los, his
        FROM (SELECT market, exchange, symbol, timeframe, min(open_time) AS lo, max(open_time) AS hi FROM (
                SELECT market, exchange, symbol, timeframe, open_time FROM changed_rows
                UNION ALL SELECT market, exchange, symbol, timeframe, open_time FROM previous_rows) ch
            WHERE timeframe IN ('15m', '1h', '4h', '1d') GROUP BY 1, 2, 3, 4) s;
    ELSE
        SELECT array_agg(market), array_agg(exchange), array_agg(symbol), array_agg(timeframe), array_agg(lo), array_agg(hi)
        INTO ms, es, ss, tfs, los, his
        FROM (SELECT market, exchange, symbol, timeframe, min(open_time) AS lo, max(open_time) AS hi FROM previous_rows
            WHERE timeframe IN ('15m', '1h', '4h', '1d') GROUP BY 1, 2, 3, 4) s;
    END IF;
    IF ms IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(TG_TABLE_SCHEMA || '.candle_series_versions', 0));
    -- A change is deep when it touched a candle older than the newest the
    -- series had before it (a delete always is); the first change a series
    -- is seen with counts as deep. Only a deep change moves the version;
    -- a new newest candle moves newest; a change of the newest candle
    -- alone (the open candle, the close) writes nothing.
    WITH c AS (
        SELECT c.*, v.newest AS was, v.market IS NOT NULL AS known
        FROM unnest(ms, es, ss, tfs, los, his) AS c(m, e, s, tf, lo, hi)
        LEFT JOIN candle_series_versions v ON v.market = c.m AND v.exchange = c.e AND v.symbol = c.s AND v.timeframe = c.tf
    ), upd AS (
        UPDATE candle_series_versions v SET
            newest = greatest(v.newest, c.hi),
            version = v.version + CASE WHEN TG_OP = 'DELETE' OR c.lo < c.was THEN 1 ELSE 0 END,
            deep_versions = CASE WHEN TG_OP = 'DELETE' OR c.lo < c.was
                THEN (v.deep_versions || (v.version + 1))[greatest(1, cardinality(v.deep_versions) - 6):] ELSE v.deep_versions END,
            deep_from = CASE WHEN TG_OP = 'DELETE' OR c.lo < c.was
                THEN (v.deep_from || c.lo)[greatest(1, cardinality(v.deep_from) - 6):] ELSE v.deep_from END,
            deep_to = CASE WHEN TG_OP = 'DELETE' OR c.lo < c.was
                THEN (v.deep_to || c.hi)[greatest(1, cardinality(v.deep_to) - 6):] ELSE v.deep_to END,
            deep_dropped = CASE WHEN (TG_OP = 'DELETE' OR c.lo < c.was) AND cardinality(v.deep_versions) >= 8
                THEN v.deep_versions[1] ELSE v.deep_dropped END
        FROM c WHERE c.known AND v.market = c.m AND v.exchange = c.e AND v.symbol = c.s AND v.timeframe = c.tf
            AND (TG_OP = 'DELETE' OR c.lo < c.was OR c.hi > c.was)
    )
    INSERT INTO candle_series_versions (market, exchange, symbol, timeframe, version, newest, deep_versions, deep_from, deep_to)
    SELECT c.m, c.e, c.s, c.tf, 1, greatest(c.hi, (SELECT max(open_time) FROM candles k
            WHERE k.market = c.m AND k.exchange = c.e AND k.symbol = c.s AND k.timeframe = c.tf)),
        ARRAY[1::bigint], ARRAY[c.lo], ARRAY[c.hi]
    FROM c WHERE NOT c.known;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER candles_versions_insert AFTER INSERT ON candles
    REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION candle_series_changed();
CREATE TRIGGER candles_versions_update AFTER UPDATE ON candles
    REFERENCING OLD TABLE AS previous_rows NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION candle_series_changed();
CREATE TRIGGER candles_versions_delete AFTER DELETE ON candles
    REFERENCING OLD TABLE AS previous_rows FOR EACH STATEMENT EXECUTE FUNCTION candle_series_changed();

-- +goose Down
DROP TRIGGER candles_versions_delete ON candles;
DROP TRIGGER candles_versions_update ON candles;
DROP TRIGGER candles_versions_insert ON candles;
DROP FUNCTION candle_series_changed();
DROP TABLE candle_series_versions;
