-- +goose Up
-- destructive-change-reviewed: the foreign key dropped is replaced by the statement trigger below, which deletes a deleted client's alert events as the key's cascade did; the service never deletes clients (it revokes them), and every alert event it writes names the client of an alert it has just read.
-- An alert event's client (issue 36). A close fires thousands of alerts,
-- and the foreign key on alert_events.client_id checked each row by a
-- look-up that locks the client's row (FOR KEY SHARE): the same hundred
-- clients' rows, locked by every save of the close at once, tens of
-- thousands of times a close. The events name the client of an alert the
-- save has just read; the key's other duty, a deleted client's events
-- deleted with it, is kept by a trigger that runs once per delete of
-- clients.

-- +goose StatementBegin
CREATE FUNCTION delete_clients_alert_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM alert_events e USING gone g WHERE e.client_id = g.id;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER clients_delete_alert_events AFTER DELETE ON clients
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION delete_clients_alert_events();

ALTER TABLE alert_events DROP CONSTRAINT alert_events_client_id_fkey;

-- +goose Down
DROP TRIGGER clients_delete_alert_events ON clients;
DROP FUNCTION delete_clients_alert_events();
DELETE FROM alert_events e WHERE NOT EXISTS (SELECT 1 FROM clients c WHERE c.id = e.client_id);
ALTER TABLE alert_events ADD CONSTRAINT alert_events_client_id_fkey FOREIGN KEY (client_id) REFERENCES clients (id) ON DELETE CASCADE NOT VALID;
ALTER TABLE alert_events VALIDATE CONSTRAINT alert_events_client_id_fkey;
