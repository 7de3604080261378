-- +goose Up
-- destructive-change-reviewed: TRUNCATE appears only as a trigger event (a truncation of stats_days deletes the totals); the migration only adds a table, two functions and two triggers.
-- The statistics' running totals (issue 37): the records are the merge of
-- every stored day of stats_days, in day order. stats_totals keeps, per
-- market and source, that merge through a day (through_day) a few weeks
-- behind the newest, so that a run merges the total with the days after
-- it instead of decoding years of days. A total is valid only while no
-- day at or before its through_day changes: the triggers below delete it
-- when one does, whoever writes, so a total in the table is always the
-- merge of the days it covers (the job then merges every day again, once).
CREATE TABLE stats_totals (
    market      text  NOT NULL,
    source      text  NOT NULL,
    through_day date  NOT NULL,
    verdicts    bytea NOT NULL,
    factors     bytea NOT NULL,
    PRIMARY KEY (market, source)
);

-- +goose StatementBegin
CREATE FUNCTION stats_days_invalidate_totals() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        DELETE FROM stats_totals WHERE market = OLD.market AND source = OLD.source AND through_day >= OLD.day;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        DELETE FROM stats_totals WHERE market = NEW.market AND source = NEW.source AND through_day >= NEW.day;
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER stats_days_invalidate_totals AFTER INSERT OR UPDATE OR DELETE ON stats_days
    FOR EACH ROW EXECUTE FUNCTION stats_days_invalidate_totals();

-- +goose StatementBegin
CREATE FUNCTION stats_days_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM stats_totals;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER stats_days_truncated AFTER TRUNCATE ON stats_days
    FOR EACH STATEMENT EXECUTE FUNCTION stats_days_truncated();

-- +goose Down
DROP TRIGGER stats_days_truncated ON stats_days;
DROP TRIGGER stats_days_invalidate_totals ON stats_days;
DROP FUNCTION stats_days_truncated();
DROP FUNCTION stats_days_invalidate_totals();
DROP TABLE stats_totals;
