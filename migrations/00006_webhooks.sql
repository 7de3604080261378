-- +goose Up
-- Webhook subscriptions. The signing secret is needed to sign deliveries,
-- so it is stored encrypted (AES-256-GCM under MARKET_SECRET_KEY, bound to
-- the row id), never in clear and never hashed.
CREATE TABLE webhooks (
    id                    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    client_id             uuid NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
    callback_url          text NOT NULL CHECK (callback_url LIKE 'https://%'),
    market                text CHECK (market IN ('crypto', 'forex', 'stocks')),
    secret_sealed         bytea NOT NULL,
    status                text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
    consecutive_failures  integer NOT NULL DEFAULT 0,
    last_delivery_at      timestamptz,
    last_error            text,
    created_at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_client ON webhooks (client_id);

-- One delivery per (verdict event, subscription), created by the fan-out in
-- the transaction that advances its cursor: an event reaches each
-- subscription once, and nothing is lost with Redis. A delivery is claimed
-- for a while (locked_until) by the worker sending it.
CREATE TABLE webhook_deliveries (
    event_id         bigint NOT NULL REFERENCES verdict_events (id) ON DELETE CASCADE,
    webhook_id       uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'dropped')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    locked_until     timestamptz,
    last_error       text,
    delivered_at     timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, webhook_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';

-- How far the fan-out has read the verdict_events outbox.
CREATE TABLE outbox_cursors (
    name     text PRIMARY KEY,
    last_id  bigint NOT NULL
);

-- +goose Down
DROP TABLE outbox_cursors;
DROP TABLE webhook_deliveries;
DROP TABLE webhooks;
