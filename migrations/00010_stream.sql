-- +goose Up
-- The event stream (GET /stream, issue 12): one row per event a client can
-- receive.
--
-- Order without loss: a row's position is (xid, id), xid being the
-- inserting transaction. A reader takes only rows whose transaction is
-- older than its snapshot's xmin (every such transaction has committed or
-- rolled back for good), in (xid, id) order. So a transaction that commits
-- late holds the stream back until it ends instead of being skipped (a
-- plain "id > last seen" would skip id 6 when it commits after id 7 was
-- read), and writers never wait for each other. The cost: a long write
-- transaction anywhere in the cluster delays the stream until it ends.
--
-- Writers: verdict_events rows (the scorer, and sandbox pushes) and every
-- statement that writes screener rows (tickers: one event per
-- combination), through triggers. The api only reads this table. Events
-- are kept at least 24 h: a writer prunes rows older than 48 h now and then.
-- Every writing transaction notifies channel <schema>.stream_events at
-- commit, so readers that LISTEN need not wait for their next poll.
--
-- Sandbox pushes (POST /sandbox/verdict-change) are verdict_events rows
-- with sandbox_client_id set: they reach that client's sandbox-key streams
-- and that client's webhooks only.
ALTER TABLE verdict_events ADD COLUMN sandbox_client_id uuid REFERENCES clients (id) ON DELETE CASCADE;

CREATE SEQUENCE stream_event_ids;
CREATE TABLE stream_events (
    id                bigint PRIMARY KEY DEFAULT nextval('stream_event_ids'),
    xid               xid8 NOT NULL DEFAULT pg_current_xact_id(),
    kind              text NOT NULL CHECK (kind IN ('verdict_changed', 'screener')),
    market            text NOT NULL,
    verdict_event_id  bigint REFERENCES verdict_events (id) ON DELETE CASCADE,
    exchange          text,
    instrument        text,
    sandbox_client_id uuid,
    at                timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX stream_events_at ON stream_events (at);
CREATE INDEX stream_events_pos ON stream_events (xid, id);

-- +goose StatementBegin
CREATE FUNCTION stream_written(schema_name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    -- Delivered at commit, once per transaction (same channel and payload).
    -- The schema is in the channel's name ("<schema>.stream_events"): channels
    -- are database-wide, and schemas sharing a database (the sandbox's, tests')
    -- must not wake each other.
    PERFORM pg_notify(schema_name || '.stream_events', '');
    IF random() < 0.001 THEN
        DELETE FROM stream_events WHERE at < now() - interval '48 hours';
    END IF;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION stream_verdict_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM stream_written(TG_TABLE_SCHEMA);
    INSERT INTO stream_events (kind, market, verdict_event_id, sandbox_client_id)
        VALUES ('verdict_changed', NEW.market, NEW.id, NEW.sandbox_client_id);
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER stream_verdict_event AFTER INSERT ON verdict_events
    FOR EACH ROW EXECUTE FUNCTION stream_verdict_event();

-- +goose StatementBegin
CREATE FUNCTION stream_screener_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    PERFORM stream_written(TG_TABLE_SCHEMA);
    FOR r IN SELECT market, exchange, instrument FROM new_tickers GROUP BY 1, 2, 3 ORDER BY 1, 2, 3 LOOP
        INSERT INTO stream_events (kind, market, exchange, instrument)
            VALUES ('screener', r.market, r.exchange, r.instrument);
    END LOOP;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- A transition table allows one event per trigger: inserts (the ingest's
-- COPY) and updates get a trigger each.
CREATE TRIGGER stream_screener_insert AFTER INSERT ON tickers
    REFERENCING NEW TABLE AS new_tickers FOR EACH STATEMENT EXECUTE FUNCTION stream_screener_event();
CREATE TRIGGER stream_screener_update AFTER UPDATE ON tickers
    REFERENCING NEW TABLE AS new_tickers FOR EACH STATEMENT EXECUTE FUNCTION stream_screener_event();

-- +goose Down
DROP TRIGGER stream_screener_update ON tickers;
DROP TRIGGER stream_screener_insert ON tickers;
DROP FUNCTION stream_screener_event();
DROP TRIGGER stream_verdict_event ON verdict_events;
DROP FUNCTION stream_verdict_event();
DROP FUNCTION stream_written(text);
DROP TABLE stream_events;
DROP SEQUENCE stream_event_ids;
ALTER TABLE verdict_events DROP COLUMN sandbox_client_id;
