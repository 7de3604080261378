-- +goose Up
-- Event-driven pipeline (issue 10): every committed verdict event is
-- announced on the Postgres channel "<schema>.verdict_events" (for the
-- default schema: "public.verdict_events") with the event id (decimal
-- text) as the payload. The schema is in the name because channels are
-- database-wide and ids are per schema: schemas sharing a database (tests,
-- load runs) must not wake each other with colliding ids. NOTIFY is transactional: the
-- notification is delivered when, and only if, the inserting transaction
-- commits, so a listener never wakes for an event it cannot read yet and
-- never misses one that committed while it was connected. A trigger (not a
-- call in the application's INSERT) covers every writer of the outbox: the
-- scorer, the sandbox, an operator's SQL. Listeners treat a notification as
-- a hint only; the periodic dispatch is the safety net.
-- +goose StatementBegin
CREATE FUNCTION notify_verdict_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_TABLE_SCHEMA || '.verdict_events', NEW.id::text);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER verdict_events_notify AFTER INSERT ON verdict_events
    FOR EACH ROW EXECUTE FUNCTION notify_verdict_event();

-- +goose Down
DROP TRIGGER verdict_events_notify ON verdict_events;
DROP FUNCTION notify_verdict_event();
