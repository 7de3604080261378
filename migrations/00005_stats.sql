-- +goose Up
-- Verdict and factor statistics per market, as computed by the stats job:
-- one row per (market, kind, source) holding every record as JSON.
CREATE TABLE analytics_stats (
    market       text NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('verdict', 'factor')),
    source       text NOT NULL CHECK (source IN ('backtest', 'live')),
    records      jsonb NOT NULL,
    assets       integer NOT NULL,
    computed_at  timestamptz NOT NULL,
    PRIMARY KEY (market, kind, source)
);

-- +goose Down
DROP TABLE analytics_stats;
