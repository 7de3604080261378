-- +goose Up
-- The event stream numbers a transaction's rows when it commits (00016):
-- a deferred trigger per row took the schema's advisory lock and numbered
-- its own row with an UPDATE. A close that fires thousands of alerts
-- writes thousands of stream rows in a few hundred transactions, and the
-- row-by-row numbering, done while holding the lock every writer waits
-- for, was a large part of the close's cost. Now the first row's trigger
-- numbers all of the transaction's rows not yet numbered, in id order, in
-- one statement, and notes the highest id it numbered in a
-- transaction-local setting; the other rows' triggers find theirs below
-- it and return. A row inserted after the numbering (SET CONSTRAINTS ...
-- IMMEDIATE in the middle of a transaction) is above it and numbers the
-- rest again. The lock, the order (id order within a transaction, commit
-- order between them) and stream_screener_latest stay as they were.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION stream_event_sequence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    mark text := 'marketd.stream_numbered_' || substr(md5(TG_TABLE_SCHEMA), 1, 16);
    upto bigint;
BEGIN
    upto := nullif(current_setting(mark, true), '')::bigint;
    IF upto IS NOT NULL AND NEW.id <= upto THEN
        RETURN NULL;
    END IF;
    -- Re-entrant: the transaction's first numbering takes it. The key is
    -- per schema (the sandbox's and tests' schemas share a database); the
    -- two-int form never meets a one-bigint key (goose's).
    PERFORM pg_advisory_xact_lock(1398035013, hashtext(TG_TABLE_SCHEMA));
    EXECUTE format('WITH mine AS (
                SELECT id, nextval(%L) AS seq FROM (
                    SELECT id FROM %I.stream_events WHERE xid = pg_current_xact_id() AND seq IS NULL ORDER BY id OFFSET 0) o
            ), numbered AS (
                UPDATE %I.stream_events s SET seq = mine.seq FROM mine WHERE s.id = mine.id
                RETURNING s.id, s.seq, s.kind, s.market, s.exchange, s.instrument
            ), latest AS (
                INSERT INTO %I.stream_screener_latest AS l (market, exchange, instrument, event_id, seq)
                    SELECT DISTINCT ON (market, exchange, instrument) market, exchange, instrument, id, seq
                    FROM numbered WHERE kind = ''screener''
                    ORDER BY market, exchange, instrument, seq DESC
                ON CONFLICT (market, exchange, instrument) DO UPDATE SET event_id = EXCLUDED.event_id, seq = EXCLUDED.seq
            )
            SELECT max(id) FROM numbered',
            quote_ident(TG_TABLE_SCHEMA) || '.stream_event_seqs', TG_TABLE_SCHEMA, TG_TABLE_SCHEMA, TG_TABLE_SCHEMA)
        INTO upto;
    PERFORM set_config(mark, greatest(upto, NEW.id)::text, true);
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION stream_event_sequence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(1398035013, hashtext(TG_TABLE_SCHEMA));
    EXECUTE format('UPDATE %I.stream_events SET seq = nextval(%L) WHERE id = $1 RETURNING seq',
            TG_TABLE_SCHEMA, quote_ident(TG_TABLE_SCHEMA) || '.stream_event_seqs')
        INTO n USING NEW.id;
    IF n IS NOT NULL AND NEW.kind = 'screener' THEN
        EXECUTE format('INSERT INTO %I.stream_screener_latest AS l (market, exchange, instrument, event_id, seq)
                VALUES ($1, $2, $3, $4, $5)
                ON CONFLICT (market, exchange, instrument) DO UPDATE SET event_id = EXCLUDED.event_id, seq = EXCLUDED.seq',
                TG_TABLE_SCHEMA)
            USING NEW.market, NEW.exchange, NEW.instrument, NEW.id, n;
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
