-- +goose Up
-- The SHA-256 of each applied migration's file, as the binary that applied
-- it had it. marketd migrate and readiness refuse a database whose recorded
-- checksum of a version differs from the binary's file of that version: a
-- landed migration was edited, and this database keeps the definitions it
-- was migrated with.
--
-- adopted: the migration was applied before its checksum could be recorded
-- (before this table existed, or by a migrate that stopped before recording
-- it); the checksum is the first recording binary's file, not verified
-- against what actually ran.
CREATE TABLE migration_checksums (
    version      bigint PRIMARY KEY,
    sha256       text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    adopted      boolean NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE migration_checksums;
