-- +goose Up
-- Clients: organisations with a contract. Limits come from the tier unless
-- the contract overrides them (rate_limit_override, quota_override,
-- quota_unlimited).
CREATE TABLE clients (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    org_name             text NOT NULL CHECK (org_name <> ''),
    tier                 text NOT NULL CHECK (tier IN ('starter', 'business', 'enterprise')),
    status               text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended')),
    markets              text[] NOT NULL CHECK (cardinality(markets) > 0 AND markets <@ ARRAY['crypto', 'forex', 'stocks']),
    rate_limit_override  integer CHECK (rate_limit_override > 0),
    quota_override       bigint CHECK (quota_override > 0),
    quota_unlimited      boolean NOT NULL DEFAULT false,
    contract_expires_at  timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CHECK (tier <> 'starter' OR cardinality(markets) = 1)
);

-- API keys: only a SHA-256 hash is stored; prefix is the first characters
-- of the key, kept to let operators recognise a key.
CREATE TABLE api_keys (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    client_id   uuid NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
    key_hash    text NOT NULL UNIQUE CHECK (length(key_hash) = 64),
    prefix      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
CREATE INDEX api_keys_client_idx ON api_keys (client_id);

-- Monthly usage: the durable ledger of admitted requests per client and
-- calendar month (UTC). month is the first day of the month.
CREATE TABLE usage_months (
    client_id  uuid NOT NULL REFERENCES clients (id) ON DELETE CASCADE,
    month      date NOT NULL,
    used       bigint NOT NULL DEFAULT 0 CHECK (used >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client_id, month)
);

-- +goose Down
DROP TABLE usage_months;
DROP TABLE api_keys;
DROP TABLE clients;
