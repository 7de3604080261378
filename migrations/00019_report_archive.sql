-- +goose Up
-- What a report was scored from, for the data-quality fields of every
-- answer: how many candles the score read and the instrument whose
-- exchange candles they are (with exchange: the feed).
ALTER TABLE analytics_reports ADD COLUMN candles_used integer NOT NULL DEFAULT 0,
    ADD COLUMN instrument text NOT NULL DEFAULT '';

-- Every published report, as it was published: GET /analytics/{market}/
-- {symbol}?as_of= answers the newest one at or before the instant, never a
-- report computed later. Written by the statement that replaces the
-- report in analytics_reports, so an archived report is exactly one that
-- was served. result is the language-neutral analytics.Result.
--
-- Retention (the analytics:retention task): every report for a window of
-- days, then only the last report of each UTC day per asset and style
-- (daily = true marks the kept ones). The partial index holds only the
-- rows not yet thinned, so a run reads what it has to decide on and never
-- the years of daily rows behind them.
CREATE TABLE analytics_report_archive (
    market         text NOT NULL,
    style          text NOT NULL,
    symbol         text NOT NULL,
    published_at   timestamptz NOT NULL,
    exchange       text NOT NULL,
    instrument     text NOT NULL,
    overall_score  integer NOT NULL,
    verdict        text NOT NULL,
    price          double precision NOT NULL,
    change_pct     double precision NOT NULL,
    candle_time    timestamptz NOT NULL,
    candle_close   double precision NOT NULL,
    candles_used   integer NOT NULL,
    result         jsonb NOT NULL,
    daily          boolean NOT NULL DEFAULT false,
    PRIMARY KEY (market, style, symbol, published_at)
);
CREATE INDEX analytics_report_archive_thin ON analytics_report_archive (published_at) WHERE NOT daily;
-- The reports standing at the migration were published at their
-- updated_at: they are the archive's first entries.
INSERT INTO analytics_report_archive (market, style, symbol, published_at, exchange, instrument, overall_score, verdict,
    price, change_pct, candle_time, candle_close, candles_used, result)
SELECT market, style, symbol, updated_at, exchange, instrument, overall_score, verdict, price, change_pct,
    candle_time, candle_close, candles_used, result FROM analytics_reports;

-- Every computation of the market statistics (analytics_stats holds the
-- latest): a report as of an instant carries the statistics computed at
-- or before its publication. Same retention as the reports.
CREATE TABLE analytics_stats_archive (
    market       text NOT NULL,
    kind         text NOT NULL,
    source       text NOT NULL,
    computed_at  timestamptz NOT NULL,
    records      jsonb NOT NULL,
    assets       integer NOT NULL,
    daily        boolean NOT NULL DEFAULT false,
    PRIMARY KEY (market, kind, source, computed_at)
);
CREATE INDEX analytics_stats_archive_thin ON analytics_stats_archive (computed_at) WHERE NOT daily;
INSERT INTO analytics_stats_archive (market, kind, source, computed_at, records, assets)
SELECT market, kind, source, computed_at, records, assets FROM analytics_stats;

-- +goose Down
DROP TABLE analytics_stats_archive;
DROP TABLE analytics_report_archive;
ALTER TABLE analytics_reports DROP COLUMN instrument, DROP COLUMN candles_used;
