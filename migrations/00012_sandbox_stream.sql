-- +goose Up
-- Sandbox streams (issue 12): a sandbox key's GET /stream is served from
-- the sandbox's own schema (MARKET_SANDBOX_DATABASE_URL), whose log holds
-- the synthetic feed's verdict_changed and screener events (the 00010
-- triggers) and, since this migration, the pushes of
-- POST /sandbox/verdict-change: one id space, so a resume with
-- Last-Event-ID works across both.
--
-- A push is two rows in two schemas (possibly two databases):
--  - in the service's schema, a verdict_events row with sandbox_client_id
--    set, which the live worker fans out to that client's webhooks (its id
--    is the delivery's webhook-id). It no longer goes into the service's
--    stream log: no live stream wants it.
--  - in the sandbox's schema, a stream_events row with sandbox_client_id
--    set (no foreign key: the clients live in the service's schema) and
--    the event itself in the push_* columns (verdict_event_id is NULL:
--    the sandbox's verdict_events hold the synthetic scorer's changes
--    only). Only that client's sandbox streams take it.
ALTER TABLE stream_events
    ADD COLUMN push_event_id      bigint,
    ADD COLUMN push_symbol        text,
    ADD COLUMN push_old_verdict   text,
    ADD COLUMN push_new_verdict   text,
    ADD COLUMN push_overall_score integer,
    ADD COLUMN push_at            timestamptz,
    ADD CONSTRAINT stream_events_push CHECK (push_event_id IS NULL OR (
        kind = 'verdict_changed' AND verdict_event_id IS NULL AND sandbox_client_id IS NOT NULL
        AND push_symbol IS NOT NULL AND push_old_verdict IS NOT NULL AND push_new_verdict IS NOT NULL
        AND push_overall_score IS NOT NULL AND push_at IS NOT NULL));

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION stream_verdict_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.sandbox_client_id IS NOT NULL THEN
        RETURN NULL; -- a sandbox push: the sandbox's log carries it
    END IF;
    PERFORM stream_written(TG_TABLE_SCHEMA);
    INSERT INTO stream_events (kind, market, verdict_event_id)
        VALUES ('verdict_changed', NEW.market, NEW.id);
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION stream_verdict_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM stream_written(TG_TABLE_SCHEMA);
    INSERT INTO stream_events (kind, market, verdict_event_id, sandbox_client_id)
        VALUES ('verdict_changed', NEW.market, NEW.id, NEW.sandbox_client_id);
    RETURN NULL;
END $$;
-- +goose StatementEnd
DELETE FROM stream_events WHERE push_event_id IS NOT NULL;
ALTER TABLE stream_events
    DROP CONSTRAINT stream_events_push,
    DROP COLUMN push_at,
    DROP COLUMN push_overall_score,
    DROP COLUMN push_new_verdict,
    DROP COLUMN push_old_verdict,
    DROP COLUMN push_symbol,
    DROP COLUMN push_event_id;
