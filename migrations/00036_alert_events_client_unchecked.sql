-- +goose Up
-- destructive-change-reviewed: the constraint dropped is alert_events' foreign key to clients, which no statement reads; the previous release inserts alert events of existing clients only (the alerts of active clients, read in the same transaction), which the table still takes, and a client's delete still removes its alert events (the trigger below does what the constraint's cascade did).
-- lock-reviewed: dropping a foreign key is a catalog change (no scan, no rewrite): alert_events and clients are locked for a moment only; the new trigger on clients is a catalog change too.
-- A close fires thousands of alerts in a few hundred saves, and the foreign
-- key checked every event against clients: a key-share lock on the client's
-- row per event (16,600 checks at a 00:00 close of 2,000 assets with 10,000
-- alerts of 100 clients, ≈ 12 µs each), the concurrent saves sharing the
-- same hundred rows' locks. Measured in one process, close by close, the
-- 00:00 close's p95 was 8 % lower without it (BENCHMARKS.md, "Alerts at a
-- close"). The events are written for the alerts of active clients, which
-- the save reads in its transaction, and only while the client's row
-- exists (the insert's own check, without a lock); the service never
-- deletes a client, and an operator's DELETE of clients still takes their
-- alert events, once a statement (TRUNCATE does not: it takes only what
-- foreign keys reach).
ALTER TABLE alert_events DROP CONSTRAINT alert_events_client_id_fkey;

-- +goose StatementBegin
CREATE FUNCTION alert_events_of_deleted_clients() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- The clients' own schema's events, whatever the deleting session's
    -- search_path (the service migrates one schema per database role).
    EXECUTE format('DELETE FROM %I.alert_events e USING old_clients o WHERE e.client_id = o.id', TG_TABLE_SCHEMA);
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER alert_events_of_deleted_clients AFTER DELETE ON clients
    REFERENCING OLD TABLE AS old_clients FOR EACH STATEMENT EXECUTE FUNCTION alert_events_of_deleted_clients();

-- The alerts' generation (migration 00029) is counted in the changed
-- table's own schema too: an operator's session whose search_path does not
-- hold it could not delete a client (or an alert) before.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION alerts_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('UPDATE %I.alert_generation SET n = n + 1', TG_TABLE_SCHEMA);
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION alerts_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE alert_generation SET n = n + 1;
    RETURN NULL;
END $$;
-- +goose StatementEnd
DROP TRIGGER alert_events_of_deleted_clients ON clients;
DROP FUNCTION alert_events_of_deleted_clients();
DELETE FROM alert_events e WHERE NOT EXISTS (SELECT 1 FROM clients c WHERE c.id = e.client_id);
ALTER TABLE alert_events ADD CONSTRAINT alert_events_client_id_fkey FOREIGN KEY (client_id) REFERENCES clients (id) ON DELETE CASCADE;
