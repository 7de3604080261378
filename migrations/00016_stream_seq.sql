-- +goose Up
-- The event stream's order is the commit order, so that no transaction
-- outside the stream (another database's, an idle session's, a migration's)
-- can hold it back.
--
-- Each row gets its place, seq, when its transaction commits: a deferred
-- constraint trigger takes an exclusive advisory lock (one per schema) and
-- numbers the transaction's rows from stream_event_seqs. Postgres releases
-- a transaction's locks only after its commit is visible, so the next
-- writer can number its rows only once this one is readable: at any moment
-- the committed rows are exactly the seqs up to some n, but for the gaps
-- of rolled-back commits. A reader's "seq > last seen" therefore never
-- skips a late commit, needs no lock of its own and waits for no one.
-- Writers serialise only between their commit trigger and their commit's
-- end (the commit's WAL flush).
--
-- The wire id stays the row id: ids given out before this migration
-- resume as before (their rows are numbered below in their former order,
-- (xid, id)). Rows not numbered (none should be) are never read.
--
-- stream_screener_latest keeps each combination's newest screener event,
-- so a replay sends the newest per combination without scanning the log.
--
-- The 48 h prune is a periodic task of the worker (stream:prune), outside
-- the writers' transactions: stream_written only notifies.

-- Waits for the writers of the former scheme to end, and keeps new ones
-- out until this migration commits (their rows are then numbered by the
-- trigger).
ALTER TABLE stream_events ADD COLUMN seq bigint;
CREATE SEQUENCE stream_event_seqs;
UPDATE stream_events s SET seq = o.n
    FROM (SELECT id, row_number() OVER (ORDER BY xid, id) AS n FROM stream_events) o
    WHERE o.id = s.id;
SELECT setval('stream_event_seqs', coalesce((SELECT max(seq) FROM stream_events), 0) + 1, false);
CREATE UNIQUE INDEX stream_events_seq ON stream_events (seq);
-- Replays walk the verdict events by seq (the screener events come from
-- stream_screener_latest).
CREATE INDEX stream_events_verdict_seq ON stream_events (seq) WHERE kind = 'verdict_changed';

CREATE TABLE stream_screener_latest (
    market     text NOT NULL,
    exchange   text NOT NULL,
    instrument text NOT NULL,
    event_id   bigint NOT NULL,
    seq        bigint NOT NULL,
    PRIMARY KEY (market, exchange, instrument)
);
INSERT INTO stream_screener_latest (market, exchange, instrument, event_id, seq)
    SELECT DISTINCT ON (market, exchange, instrument) market, exchange, instrument, id, seq
    FROM stream_events WHERE kind = 'screener'
    ORDER BY market, exchange, instrument, seq DESC;

-- +goose StatementBegin
CREATE FUNCTION stream_event_sequence() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    -- Re-entrant: the transaction's first row takes it, the others find it
    -- held. The key is per schema (the sandbox's and tests' schemas share
    -- a database); the two-int form never meets a one-bigint key (goose's).
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

CREATE CONSTRAINT TRIGGER stream_events_sequence AFTER INSERT ON stream_events
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION stream_event_sequence();

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION stream_written(schema_name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    -- Delivered at commit, once per transaction (same channel and payload).
    -- The schema is in the channel's name ("<schema>.stream_events"): channels
    -- are database-wide, and schemas sharing a database (the sandbox's, tests')
    -- must not wake each other.
    PERFORM pg_notify(schema_name || '.stream_events', '');
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION stream_written(schema_name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(schema_name || '.stream_events', '');
    IF random() < 0.001 THEN
        DELETE FROM stream_events WHERE at < now() - interval '48 hours';
    END IF;
END $$;
-- +goose StatementEnd
DROP TRIGGER stream_events_sequence ON stream_events;
DROP FUNCTION stream_event_sequence();
DROP TABLE stream_screener_latest;
DROP INDEX stream_events_verdict_seq;
DROP INDEX stream_events_seq;
ALTER TABLE stream_events DROP COLUMN seq;
DROP SEQUENCE stream_event_seqs;
