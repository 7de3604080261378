-- +goose Up
-- Webhook delivery engine, second version (issue 14).
--
-- * The claim moves from the delivery to the subscription: a worker leases
--   a subscription (lease_token, lease_until) and sends its oldest due
--   delivery, so at most one delivery per subscription is in flight and a
--   subscription's events go out in order. Outcomes are recorded only with
--   the lease token (fencing): a worker whose lease ran out records nothing.
-- * Errors are stored as categories (dns_failure, address_not_allowed,
--   connect_failed, tls_error, timeout, http_status + code, ...), never as
--   driver text (which carried resolver addresses and host names).
-- * Secret rotation keeps the previous secret for 24 h.
-- * The fan-out marks each verdict event instead of advancing a cursor: a
--   cursor skips an event whose transaction commits after a later id was
--   read (concurrent scorers), a per-event mark does not.
ALTER TABLE webhooks
    ADD COLUMN lease_token          uuid,
    ADD COLUMN lease_until          timestamptz,
    ADD COLUMN last_success_at      timestamptz,
    ADD COLUMN last_error_category  text,
    ADD COLUMN last_error_status    integer,
    ADD COLUMN last_error_at        timestamptz,
    ADD COLUMN secret_prev_sealed   bytea,
    ADD COLUMN secret_prev_until    timestamptz;
UPDATE webhooks SET last_error_category = 'unknown', last_error_at = last_delivery_at WHERE last_error IS NOT NULL;
ALTER TABLE webhooks DROP COLUMN last_error;

ALTER TABLE webhook_deliveries
    ADD COLUMN id              bigint GENERATED ALWAYS AS IDENTITY,
    ADD COLUMN error_category  text,
    ADD COLUMN response_status integer,
    ADD COLUMN latency_ms      integer,
    ADD COLUMN last_attempt_at timestamptz,
    ADD COLUMN drop_reason     text;
UPDATE webhook_deliveries SET error_category = 'unknown' WHERE last_error IS NOT NULL AND status <> 'delivered';
ALTER TABLE webhook_deliveries DROP COLUMN last_error, DROP COLUMN locked_until;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_id UNIQUE (id);
DROP INDEX webhook_deliveries_due;
-- The head of each subscription's queue: its oldest pending delivery.
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (webhook_id, event_id) WHERE status = 'pending';
-- The delivery log, newest first.
CREATE INDEX webhook_deliveries_log ON webhook_deliveries (webhook_id, id DESC);

-- Events up to the old cursor were fanned out; later ones were not.
ALTER TABLE verdict_events ADD COLUMN fanned_out boolean NOT NULL DEFAULT true;
ALTER TABLE verdict_events ALTER COLUMN fanned_out SET DEFAULT false;
UPDATE verdict_events SET fanned_out = false
    WHERE id > coalesce((SELECT last_id FROM outbox_cursors WHERE name = 'webhooks'), 0);
CREATE INDEX verdict_events_fan_out ON verdict_events (id) WHERE NOT fanned_out;
DELETE FROM outbox_cursors WHERE name = 'webhooks';

-- +goose Down
INSERT INTO outbox_cursors (name, last_id)
    SELECT 'webhooks', coalesce(max(id), 0) FROM verdict_events WHERE fanned_out
    ON CONFLICT (name) DO UPDATE SET last_id = excluded.last_id;
DROP INDEX verdict_events_fan_out;
ALTER TABLE verdict_events DROP COLUMN fanned_out;
DROP INDEX webhook_deliveries_log;
DROP INDEX webhook_deliveries_pending;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_id;
ALTER TABLE webhook_deliveries
    ADD COLUMN last_error text,
    ADD COLUMN locked_until timestamptz;
UPDATE webhook_deliveries SET last_error = error_category WHERE error_category IS NOT NULL;
ALTER TABLE webhook_deliveries
    DROP COLUMN id, DROP COLUMN error_category, DROP COLUMN response_status, DROP COLUMN latency_ms,
    DROP COLUMN last_attempt_at, DROP COLUMN drop_reason;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
ALTER TABLE webhooks ADD COLUMN last_error text;
UPDATE webhooks SET last_error = last_error_category WHERE last_error_category IS NOT NULL;
ALTER TABLE webhooks
    DROP COLUMN lease_token, DROP COLUMN lease_until, DROP COLUMN last_success_at, DROP COLUMN last_error_category,
    DROP COLUMN last_error_status, DROP COLUMN last_error_at, DROP COLUMN secret_prev_sealed, DROP COLUMN secret_prev_until;
