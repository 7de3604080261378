-- +goose Up
-- The statistics job's sufficient statistics (worker.StatsJob, docs/statistics.md),
-- so that it reads every stored daily candle once and a new day adds only
-- that day's observations.
--
-- stats_days holds, per market, source and day, the observations of the
-- bars of that day across all assets (domain/stats accumulators, JSON text:
-- per-day tallies, running means and co-moments, merged exactly). The
-- records are the merge of every day, in day order. stats_assets holds,
-- per asset, how far its daily candles were read (through_day), the candle
-- series version (migration 00023) it was read at, and the verdict of each
-- day (a byte per calendar day from first_day), from which the scorer's
-- hysteresis resumes and a bar whose forward return completes later is
-- judged. stats_progress names the scoring method the state was computed
-- with (another method recomputes everything), a generation that two
-- overlapping runs use to detect each other, and the day from which a run
-- that saves its assets in several transactions (100 at a time) still has
-- days to judge again for the assets it has not saved yet.
CREATE TABLE stats_progress (
    market       text PRIMARY KEY,
    method       text   NOT NULL,
    generation   bigint NOT NULL,
    pending_drop date
);

CREATE TABLE stats_assets (
    market         text    NOT NULL,
    symbol         text    NOT NULL,
    exchange       text    NOT NULL,
    first_day      date    NOT NULL,
    through_day    date    NOT NULL,
    series_version bigint  NOT NULL,
    -- whether the asset has enough candles to be scored (it then counts
    -- in the records' number of assets)
    observed       boolean NOT NULL,
    backtest       bytea   NOT NULL,
    live           bytea   NOT NULL,
    PRIMARY KEY (market, symbol)
);

CREATE TABLE stats_days (
    market   text  NOT NULL,
    source   text  NOT NULL,
    day      date  NOT NULL,
    verdicts bytea NOT NULL,
    factors  bytea NOT NULL,
    PRIMARY KEY (market, source, day)
);

-- +goose Down
DROP TABLE stats_days;
DROP TABLE stats_assets;
DROP TABLE stats_progress;
