-- +goose Up
-- A report's result is kept as the JSON text the worker wrote (json, not
-- jsonb) and compressed with lz4. Nothing queries inside it, and every
-- scoring run writes it twice (the report and its archive copy): parsing
-- ≈ 7 kB into jsonb on the way in, pglz, and a TOAST row for the ≈ 2.1 kB
-- it compressed to cost a save half its time (store's
-- BenchmarkSaveRescoring: ≈ 0.97 ms a record before, ≈ 0.40 ms after; lz4
-- keeps ≈ 1.8 kB inline).
--
-- The type change rewrites both tables under an exclusive lock: ≈ 7,800
-- archived reports a second (AMD EPYC, 2026-11-27), so scoring and reads
-- as of an instant wait that long (README, "Migrations and rolling
-- upgrades"). lz4 needs a server built with it (PostgreSQL's own packages
-- and images are); elsewhere the default compression stays.
-- destructive-change-reviewed: the previous release writes and reads result as JSON bytes through pgx, which encodes and scans json and jsonb alike; no statement of it uses a jsonb operator on result.
-- +goose StatementBegin
DO $$
BEGIN
    ALTER TABLE analytics_reports ALTER COLUMN result TYPE json USING result::json,
        ALTER COLUMN result SET COMPRESSION lz4;
    ALTER TABLE analytics_report_archive ALTER COLUMN result TYPE json USING result::json,
        ALTER COLUMN result SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'lz4 is not supported by this server: result keeps the default compression';
    ALTER TABLE analytics_reports ALTER COLUMN result TYPE json USING result::json;
    ALTER TABLE analytics_report_archive ALTER COLUMN result TYPE json USING result::json;
END $$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE analytics_reports ALTER COLUMN result TYPE jsonb USING result::jsonb, ALTER COLUMN result SET COMPRESSION default;
ALTER TABLE analytics_report_archive ALTER COLUMN result TYPE jsonb USING result::jsonb, ALTER COLUMN result SET COMPRESSION default;
