-- +goose Up
-- The time (fundamentals.updated_at) of the fundamentals a report was
-- scored with; NULL: scored without. Scoring compares the stored
-- fundamentals with it, not with the report's own time: a report scored
-- while the fundamentals' transaction was still open (stamped before its
-- commit) was made later than they are stamped, yet without them, and
-- used to wait for its next open-candle slot (swing: 15 minutes) to get them.
ALTER TABLE analytics_reports ADD COLUMN fundamentals_at timestamptz;

-- +goose Down
ALTER TABLE analytics_reports DROP COLUMN fundamentals_at;
