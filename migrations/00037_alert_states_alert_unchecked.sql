-- +goose Up
-- destructive-change-reviewed: the constraint dropped is alert_states' foreign key to alerts, which no statement reads; the previous release inserts the states of existing alerts only (its insert joins alerts and locks each alert's row FOR KEY SHARE until its commit), which the table still takes, and an alert's delete (or a client's, through its alerts) still removes the alert's states (the triggers below do what the constraint's cascade did). TRUNCATE appears only as a trigger event and in the trigger's body: a TRUNCATE of alerts (CASCADE, which alert_symbols' foreign key still asks for) takes the states, as the constraint's CASCADE did.
-- lock-reviewed: dropping a foreign key is a catalog change (no scan, no rewrite): alert_states and alerts are locked for a moment only; the new triggers on alerts are catalog changes too.
-- A close's saves insert thousands of alert states (an alert's first
-- value on an asset), and the foreign key checked each against alerts: a
-- query and a key-share lock on the alert's row per state (≈ 14 µs each on
-- a quiet database), the same row the insert has just locked itself: the
-- insert joins alerts FOR KEY SHARE, so that a state is written only for an
-- alert that exists, and the lock, held to the commit, keeps a delete of
-- the alert waiting until the state is there for the delete to take.
-- Measured in one process, close by close, a 00:00 close's alerts' p95 was
-- 6 % lower without it (BENCHMARKS.md, "Alerts at a close"). An alert's
-- delete takes its states once a statement, as a TRUNCATE of the alerts
-- takes every state. The trigger's delete reads the states as its
-- transaction sees them: a delete in READ COMMITTED (the service's) sees
-- the state a save committed while the delete waited for the alert's
-- lock; one in REPEATABLE READ or SERIALIZABLE (an operator's session)
-- does not, and leaves that state behind, never read (the saves look
-- states up for the alerts they evaluate only).
ALTER TABLE alert_states DROP CONSTRAINT alert_states_alert_id_fkey;

-- +goose StatementBegin
CREATE FUNCTION alert_states_of_deleted_alerts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- The alerts' own schema's states, whatever the deleting session's
    -- search_path (the service migrates one schema per database role).
    IF TG_OP = 'TRUNCATE' THEN
        EXECUTE format('TRUNCATE %I.alert_states', TG_TABLE_SCHEMA);
    ELSE
        EXECUTE format('DELETE FROM %I.alert_states s USING old_alerts o WHERE s.alert_id = o.id', TG_TABLE_SCHEMA);
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER alert_states_of_deleted_alerts AFTER DELETE ON alerts
    REFERENCING OLD TABLE AS old_alerts FOR EACH STATEMENT EXECUTE FUNCTION alert_states_of_deleted_alerts();
CREATE TRIGGER alert_states_of_truncated_alerts AFTER TRUNCATE ON alerts
    FOR EACH STATEMENT EXECUTE FUNCTION alert_states_of_deleted_alerts();

-- +goose Down
DROP TRIGGER alert_states_of_truncated_alerts ON alerts;
DROP TRIGGER alert_states_of_deleted_alerts ON alerts;
DROP FUNCTION alert_states_of_deleted_alerts();
DELETE FROM alert_states s WHERE NOT EXISTS (SELECT 1 FROM alerts a WHERE a.id = s.alert_id);
ALTER TABLE alert_states ADD CONSTRAINT alert_states_alert_id_fkey FOREIGN KEY (alert_id) REFERENCES alerts (id) ON DELETE CASCADE;
