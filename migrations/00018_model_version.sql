-- +goose Up
-- The model version (analytics.Versions) that made each history snapshot
-- and verdict event, so history, webhooks and the event stream can say
-- which published method produced a value. The default is v1, the only
-- version a binary without this column runs: it names the rows that exist
-- when this runs and the rows a binary of the previous release writes.
-- Binaries that know versions write the column themselves.
ALTER TABLE analytics_snapshots ADD COLUMN model_version text NOT NULL DEFAULT 'v1';
ALTER TABLE verdict_events ADD COLUMN model_version text NOT NULL DEFAULT 'v1';

-- +goose Down
ALTER TABLE verdict_events DROP COLUMN model_version;
ALTER TABLE analytics_snapshots DROP COLUMN model_version;
