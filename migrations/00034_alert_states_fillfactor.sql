-- +goose Up
-- lock-reviewed: a storage parameter takes SHARE UPDATE EXCLUSIVE for a catalog change only (no rewrite): writes go on.
-- A close rewrites tens of thousands of alert states (issue 36): every
-- firing and every condition turning false updates its row. The columns
-- updated are in no index, so with room left in the row's page the update
-- is a heap-only tuple and neither index (the key, alert_states_symbol)
-- takes a new entry. Pages filled from now on keep 30 % free.
ALTER TABLE alert_states SET (fillfactor = 70);

-- +goose Down
ALTER TABLE alert_states RESET (fillfactor);
