-- +goose Up
-- destructive-change-reviewed: the two triggers dropped are replaced in the same transaction by statement-level ones that write the same stream rows and wake the same channel; the previous release only inserts into alert_events, which the new triggers serve alike.
-- lock-reviewed: alerts is small (each client holds at most its tier's alert cap), so building its index and filling alert_symbols (a new table) from it blocks alert writes for a moment only; the trigger swap on alert_events is a catalog change.
-- Alerts at a close (issue 36): a save evaluates only the alerts that
-- watch its assets. alert_symbols lists the symbols each alert names (an
-- alert on its whole market has symbols NULL and no row here), kept by a
-- trigger on alerts, so a save finds its alerts by index instead of
-- reading every alert of the market.
CREATE TABLE alert_symbols (
    market   text NOT NULL,
    symbol   text NOT NULL,
    alert_id uuid NOT NULL REFERENCES alerts (id) ON DELETE CASCADE,
    PRIMARY KEY (market, symbol, alert_id)
);
CREATE INDEX alert_symbols_alert ON alert_symbols (alert_id);
CREATE INDEX alerts_whole_market ON alerts (market) WHERE symbols IS NULL;

-- +goose StatementBegin
CREATE FUNCTION alert_symbols_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        DELETE FROM alert_symbols WHERE alert_id = OLD.id;
    END IF;
    INSERT INTO alert_symbols (market, symbol, alert_id)
        SELECT DISTINCT NEW.market, s, NEW.id FROM unnest(NEW.symbols) AS s;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER alert_symbols_sync AFTER INSERT OR UPDATE OF market, symbols ON alerts
    FOR EACH ROW EXECUTE FUNCTION alert_symbols_sync();
INSERT INTO alert_symbols (market, symbol, alert_id)
    SELECT DISTINCT a.market, s, a.id FROM alerts a, unnest(a.symbols) AS s;

-- alert_generation changes with every change of an alert or a client, so
-- a worker may keep the alerts in memory and know, with one row read in
-- the save's transaction, whether its copy is still the table's.
CREATE TABLE alert_generation (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    n   bigint NOT NULL
);
INSERT INTO alert_generation (one, n) VALUES (true, 1);
-- +goose StatementBegin
CREATE FUNCTION alerts_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE alert_generation SET n = n + 1;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER alerts_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON alerts
    FOR EACH STATEMENT EXECUTE FUNCTION alerts_changed();
CREATE TRIGGER clients_changed AFTER UPDATE OR DELETE OR TRUNCATE ON clients
    FOR EACH STATEMENT EXECUTE FUNCTION alerts_changed();

-- A close fires thousands of alerts in a few hundred saves: one stream
-- insert and one wake-up per statement, not per row. The stream rows keep
-- the events' order (their ids); the dispatchers only need the newest id.
-- +goose StatementBegin
CREATE FUNCTION stream_alert_events() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    newest bigint;
BEGIN
    SELECT max(id) INTO newest FROM new_rows;
    IF newest IS NULL THEN
        RETURN NULL;
    END IF;
    IF EXISTS (SELECT 1 FROM new_rows WHERE NOT sandbox) THEN
        PERFORM stream_written(TG_TABLE_SCHEMA);
        INSERT INTO stream_events (kind, market, client_id, alert_event_id, payload)
            SELECT 'alert', n.market, n.client_id, n.id, jsonb_build_object(
                'alert_id', n.alert_id, 'alert_name', n.alert_name, 'symbol', n.symbol, 'at', n.at, 'values', n.read)
            FROM new_rows n WHERE NOT n.sandbox ORDER BY n.id;
    END IF;
    PERFORM pg_notify(TG_TABLE_SCHEMA || '.verdict_events', newest::text);
    RETURN NULL;
END $$;
-- +goose StatementEnd
DROP TRIGGER stream_alert_event ON alert_events;
DROP TRIGGER alert_events_notify ON alert_events;
CREATE TRIGGER stream_alert_events AFTER INSERT ON alert_events
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION stream_alert_events();

-- +goose Down
DROP TRIGGER clients_changed ON clients;
DROP TRIGGER alerts_changed ON alerts;
DROP FUNCTION alerts_changed();
DROP TABLE alert_generation;
DROP TRIGGER stream_alert_events ON alert_events;
DROP FUNCTION stream_alert_events();
CREATE TRIGGER stream_alert_event AFTER INSERT ON alert_events
    FOR EACH ROW EXECUTE FUNCTION stream_alert_event();
CREATE TRIGGER alert_events_notify AFTER INSERT ON alert_events
    FOR EACH ROW EXECUTE FUNCTION notify_alert_event();
DROP TRIGGER alert_symbols_sync ON alerts;
DROP FUNCTION alert_symbols_sync();
DROP INDEX alerts_whole_market;
DROP TABLE alert_symbols;
