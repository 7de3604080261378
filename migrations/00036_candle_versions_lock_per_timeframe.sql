-- +goose Up
-- The writers of versioned candles (00023) took one advisory lock per
-- schema, held until they committed: every write of a scored timeframe's
-- candles waited for every other one, of any market, exchange or
-- timeframe. At a cold start the push feeds' catch-up loads crypto's four
-- scored timeframes side by side, and each pass's writes (12,000 candles
-- a flush) queued behind the others' and behind the pushes; at the stock
-- bell the five exchanges' closing reads and crypto's closing pushes
-- queued likewise. What the lock guarantees is per series: a series'
-- changes are judged in commit order, each against the newest candle as
-- committed before it, and an upsert's two triggers (INSERT, then UPDATE)
-- of two statements cannot lock its version rows in opposite orders. So
-- the lock is now one per market, exchange and timeframe (a superset of
-- each series it covers), taken in that order for every one a statement
-- changed: writers of different timeframes or exchanges no longer wait for
-- each other, writers of one still do. A statement whose INSERT and
-- UPDATE triggers lock different timeframes takes the second's locks
-- later, so two such statements writing crossing sets concurrently can
-- deadlock; Postgres then aborts one, which store.upsertCandles retries
-- (only the push feeds write several scored timeframes in one statement,
-- from one process at a time). The function is replaced in place: the
-- triggers and the previous release are unchanged.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION candle_series_changed() RETURNS trigger LANGUAGE plpgsql AS $$
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
    -- One lock per market, exchange and timeframe the statement changed,
    -- taken in order.
    PERFORM pg_advisory_xact_lock(hashtextextended(TG_TABLE_SCHEMA || '.candle_series_versions/' || g.m || '/' || g.e || '/' || g.tf, 0))
    FROM (SELECT DISTINCT u.m, u.e, u.tf FROM unnest(ms, es, tfs) AS u(m, e, tf) ORDER BY 1, 2, 3) g;
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

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION candle_series_changed() RETURNS trigger LANGUAGE plpgsql AS $$
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
