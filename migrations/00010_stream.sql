-- +goose Up
-- The event stream (GET /stream, issue 12): one row per event a client can
-- receive, with an id that is its position in the stream.
--
-- Ids are handed out in COMMIT order, not in insertion order: the trigger
-- function takes a transaction-scoped advisory lock before it draws an id,
-- and the lock is held until the transaction ends. So once a reader sees id
-- N, every id below N is committed (or was rolled back and never will be):
-- a reader that asks for "id > last seen" never skips an event that
-- committed late. A bigserial alone would (a scorer that inserts id 6 and
-- commits after another scorer committed id 7).
--
-- Writers: verdict_events rows (the scorer, and sandbox pushes) and every
-- statement that writes screener rows (tickers: one event per
-- combination). The api only reads this table. Events are kept at least
-- 24 h: a writer prunes rows older than 48 h now and then.
--
-- Sandbox pushes (POST /sandbox/verdict-change) are verdict_events rows
-- with sandbox_client_id set: they reach that client's sandbox streams and
-- sandbox webhooks only.
ALTER TABLE verdict_events ADD COLUMN sandbox_client_id uuid REFERENCES clients (id) ON DELETE CASCADE;

CREATE SEQUENCE stream_event_ids;
CREATE TABLE stream_events (
    id                bigint PRIMARY KEY,
    kind              text NOT NULL CHECK (kind IN ('verdict_changed', 'screener')),
    market            text NOT NULL,
    verdict_event_id  bigint REFERENCES verdict_events (id) ON DELETE CASCADE,
    exchange          text,
    instrument        text,
    sandbox_client_id uuid,
    at                timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX stream_events_at ON stream_events (at);

-- +goose StatementBegin
CREATE FUNCTION stream_event_id() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    -- One lock per schema (tests run on schemas of their own).
    PERFORM pg_advisory_xact_lock(hashtext(current_schema() || '.stream_events'));
    IF random() < 0.001 THEN
        DELETE FROM stream_events WHERE at < now() - interval '48 hours';
    END IF;
    RETURN nextval('stream_event_ids');
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION stream_verdict_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO stream_events (id, kind, market, verdict_event_id, sandbox_client_id)
        VALUES (stream_event_id(), 'verdict_changed', NEW.market, NEW.id, NEW.sandbox_client_id);
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
    FOR r IN SELECT market, exchange, instrument FROM new_tickers GROUP BY 1, 2, 3 ORDER BY 1, 2, 3 LOOP
        INSERT INTO stream_events (id, kind, market, exchange, instrument)
            VALUES (stream_event_id(), 'screener', r.market, r.exchange, r.instrument);
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
DROP FUNCTION stream_event_id();
DROP TABLE stream_events;
DROP SEQUENCE stream_event_ids;
ALTER TABLE verdict_events DROP COLUMN sandbox_client_id;
