-- +goose Up
-- destructive-change-reviewed: the two constraints dropped here are replaced, not relied on: the previous release never deletes verdict_events (the foreign key's cascade never ran) and writes only the stream kinds the wider check still allows.
-- Alerts a client defines (issue 36): a condition over an asset's
-- analytics and screener fields, evaluated by the scorer after each
-- rescoring, delivered through the webhook outbox and the event stream.
--
-- alerts: the definitions, scoped by client. The expression is stored as
-- the client wrote it; every worker compiles it once and caches it.
CREATE TABLE alerts (
    id               uuid PRIMARY KEY,
    client_id        uuid NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
    name             text NOT NULL,
    market           text NOT NULL,
    expression       text NOT NULL,
    symbols          text[],
    cooldown_seconds integer NOT NULL CHECK (cooldown_seconds >= 0),
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX alerts_client ON alerts (client_id, created_at);
CREATE INDEX alerts_market ON alerts (market);

-- alert_states: per alert and asset, the condition's last value and when
-- it last fired. A row exists once the condition has held for the asset
-- (an absent row is "false so far"); it is written in the transaction
-- that saves the rescoring, so a worker that dies loses or doubles nothing.
CREATE TABLE alert_states (
    alert_id      uuid NOT NULL REFERENCES alerts (id) ON DELETE CASCADE,
    symbol        text NOT NULL,
    matched       boolean NOT NULL,
    evaluated_at  timestamptz NOT NULL,
    last_fired_at timestamptz,
    PRIMARY KEY (alert_id, symbol)
);

-- alert_events: the outbox of alert.triggered events, beside
-- verdict_events and numbered from the same sequence: one id space, so a
-- subscription's deliveries go out in event order whatever their kind, and
-- an id names one event (the webhook-id and the body's id). The fan-out
-- marks each row as it does verdict events. Rows of a deleted alert stay
-- (its pending deliveries are dropped).
CREATE TABLE alert_events (
    id          bigint PRIMARY KEY DEFAULT nextval('verdict_events_id_seq'),
    alert_id    uuid NOT NULL,
    alert_name  text NOT NULL,
    client_id   uuid NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
    market      text NOT NULL,
    symbol      text NOT NULL,
    at          timestamptz NOT NULL,
    read        jsonb NOT NULL,
    sandbox     boolean NOT NULL DEFAULT false,
    fanned_out  boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (alert_id, symbol, at)
);
CREATE INDEX alert_events_fan_out ON alert_events (id) WHERE NOT fanned_out;

-- Every event a webhook delivery can carry, whatever its table. client_id
-- limits an event to one client's subscriptions (an alert's owner, a
-- sandbox push's client); NULL means every eligible subscription.
CREATE VIEW outbox_events AS
    SELECT id, 'verdict_changed'::text AS kind, market, symbol, old_verdict, new_verdict, overall_score, at, created_at,
        sandbox_client_id AS client_id, sandbox_client_id IS NOT NULL AS sandbox, model_version,
        NULL::uuid AS alert_id, NULL::text AS alert_name, NULL::jsonb AS read
    FROM verdict_events
    UNION ALL
    SELECT id, 'alert.triggered'::text, market, symbol, NULL::text, NULL::text, NULL::integer, at, created_at,
        client_id, sandbox, NULL::text, alert_id, alert_name, read
    FROM alert_events;

-- A delivery's event is a row of verdict_events or of alert_events.
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_id_fkey;

-- The stream carries alert events to their client's streams only.
ALTER TABLE stream_events
    ADD COLUMN client_id      uuid,
    ADD COLUMN alert_event_id bigint,
    ADD COLUMN payload        jsonb;
ALTER TABLE stream_events DROP CONSTRAINT stream_events_kind_check;
ALTER TABLE stream_events ADD CONSTRAINT stream_events_kind_check CHECK (kind IN ('verdict_changed', 'screener', 'alert')) NOT VALID;
ALTER TABLE stream_events VALIDATE CONSTRAINT stream_events_kind_check;

-- A live alert event goes into the stream's log as it is written (a
-- sandbox one goes into the sandbox's log, written by its push).
-- +goose StatementBegin
CREATE FUNCTION stream_alert_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.sandbox THEN
        RETURN NULL;
    END IF;
    PERFORM stream_written(TG_TABLE_SCHEMA);
    INSERT INTO stream_events (kind, market, client_id, alert_event_id, payload)
        VALUES ('alert', NEW.market, NEW.client_id, NEW.id, jsonb_build_object(
            'alert_id', NEW.alert_id, 'alert_name', NEW.alert_name, 'symbol', NEW.symbol, 'at', NEW.at, 'values', NEW.read));
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER stream_alert_event AFTER INSERT ON alert_events
    FOR EACH ROW EXECUTE FUNCTION stream_alert_event();

-- A committed alert event wakes the dispatchers as a verdict event does.
-- +goose StatementBegin
CREATE FUNCTION notify_alert_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_TABLE_SCHEMA || '.verdict_events', NEW.id::text);
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER alert_events_notify AFTER INSERT ON alert_events
    FOR EACH ROW EXECUTE FUNCTION notify_alert_event();

-- +goose Down
DROP TRIGGER alert_events_notify ON alert_events;
DROP FUNCTION notify_alert_event();
DROP TRIGGER stream_alert_event ON alert_events;
DROP FUNCTION stream_alert_event();
DELETE FROM stream_events WHERE kind = 'alert';
ALTER TABLE stream_events DROP CONSTRAINT stream_events_kind_check;
ALTER TABLE stream_events ADD CONSTRAINT stream_events_kind_check CHECK (kind IN ('verdict_changed', 'screener'));
ALTER TABLE stream_events DROP COLUMN payload, DROP COLUMN alert_event_id, DROP COLUMN client_id;
DELETE FROM webhook_deliveries d WHERE NOT EXISTS (SELECT 1 FROM verdict_events e WHERE e.id = d.event_id);
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_event_id_fkey
    FOREIGN KEY (event_id) REFERENCES verdict_events (id) ON DELETE CASCADE;
DROP VIEW outbox_events;
DROP TABLE alert_events;
DROP TABLE alert_states;
DROP TABLE alerts;
