-- +goose Up
-- destructive-change-reviewed: the trigger dropped is created again in the same transaction, with a WHEN clause that skips rows already numbered; the previous release never inserts a numbered row, so every one of its rows still queues the trigger.
-- Alert events reach the stream numbered (issue 36). A close that fires
-- thousands of alerts wrote each one's stream row twice: inserted without
-- a position, then, at commit, updated with one (a second version of the
-- row and of its five index entries), with a deferred trigger queued per
-- row. The alert statement trigger is the last write of a save, so it now
-- takes the stream lock itself (held to the commit, as the commit
-- trigger's is), numbers the transaction's earlier rows (a save's verdict
-- events: id order is kept) and inserts the alert rows with their
-- positions. The deferred trigger is queued only for rows inserted
-- without one (a constraint trigger's WHEN is evaluated at the insert).
-- The order guarantees are unchanged: docs/stream-order.md.

-- +goose StatementBegin
-- stream_number_pending takes the schema's stream lock and numbers the
-- transaction's rows not yet numbered, in id order; it returns the highest
-- id numbered (NULL: none) and notes it in the transaction-local mark that
-- stream_event_sequence reads.
CREATE FUNCTION stream_number_pending(schema_name text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    mark text := 'marketd.stream_numbered_' || substr(md5(schema_name), 1, 16);
    upto bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(1398035013, hashtext(schema_name));
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
            quote_ident(schema_name) || '.stream_event_seqs', schema_name, schema_name, schema_name)
        INTO upto;
    IF upto IS NOT NULL THEN
        PERFORM set_config(mark, greatest(upto, nullif(current_setting(mark, true), '')::bigint)::text, true);
    END IF;
    RETURN upto;
END $$;
-- +goose StatementEnd

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
    -- Re-entrant: the transaction's first numbering takes the lock. The
    -- key is per schema (the sandbox's and tests' schemas share a
    -- database); the two-int form never meets a one-bigint key (goose's).
    upto := stream_number_pending(TG_TABLE_SCHEMA);
    PERFORM set_config(mark, greatest(upto, NEW.id, nullif(current_setting(mark, true), '')::bigint)::text, true);
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION stream_alert_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    mark text := 'marketd.stream_numbered_' || substr(md5(TG_TABLE_SCHEMA), 1, 16);
    newest bigint;
    upto bigint;
BEGIN
    SELECT max(id) INTO newest FROM new_rows;
    IF newest IS NULL THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM new_rows WHERE NOT sandbox) THEN
        PERFORM stream_written(TG_TABLE_SCHEMA);
        -- The lock is taken here and held to the commit; the rows the
        -- transaction wrote before are numbered first (id order).
        PERFORM stream_number_pending(TG_TABLE_SCHEMA);
        EXECUTE format('WITH ins AS (
                    INSERT INTO %I.stream_events (kind, market, client_id, alert_event_id, payload, seq)
                    SELECT ''alert'', o.market, o.client_id, o.id, o.payload, nextval(%L)
                    FROM (SELECT n.market, n.client_id, n.id, jsonb_build_object(
                            ''alert_id'', n.alert_id, ''alert_name'', n.alert_name, ''symbol'', n.symbol, ''at'', n.at,
                            ''values'', n.read) AS payload
                        FROM new_rows n WHERE NOT n.sandbox ORDER BY n.id OFFSET 0) o
                    RETURNING id)
                SELECT max(id) FROM ins',
                TG_TABLE_SCHEMA, quote_ident(TG_TABLE_SCHEMA) || '.stream_event_seqs')
            INTO upto;
        PERFORM set_config(mark, greatest(upto, nullif(current_setting(mark, true), '')::bigint)::text, true);
    END IF;
    PERFORM pg_notify(TG_TABLE_SCHEMA || '.verdict_events', newest::text);
    RETURN NULL;
END $$;
-- +goose StatementEnd

DROP TRIGGER stream_events_sequence ON stream_events;
CREATE CONSTRAINT TRIGGER stream_events_sequence AFTER INSERT ON stream_events
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.seq IS NULL) EXECUTE FUNCTION stream_event_sequence();

-- +goose Down
DROP TRIGGER stream_events_sequence ON stream_events;
CREATE CONSTRAINT TRIGGER stream_events_sequence AFTER INSERT ON stream_events
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION stream_event_sequence();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION stream_alert_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    newest bigint;
BEGIN
    SELECT max(id) INTO newest FROM new_rows;
    IF newest IS NULL THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM new_rows WHERE NOT sandbox) THEN
        PERFORM stream_written(TG_TABLE_SCHEMA);
        INSERT INTO stream_events (kind, market, client_id, alert_event_id, payload)
            SELECT 'alert', n.market, n.client_id, n.id, jsonb_build_object(
                'alert_id', n.alert_id, 'alert_name', n.alert_name, 'symbol', n.symbol, 'at', n.at, 'values', n.read)
            FROM new_rows n WHERE NOT n.sandbox ORDER BY n.id;
    END IF;
    PERFORM pg_notify(TG_TABLE_SCHEMA || '.verdict_events', newest::text);
    RETURN NULL;
END $$;
-- +goose StatementEnd
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
DROP FUNCTION stream_number_pending(text);
