-- +goose Up
-- The latest analytics of every scored asset, per trading style: what the
-- api serves. result is the language-neutral analytics.Result (JSON); the
-- api renders it in the requested language.
CREATE TABLE analytics_reports (
    market         text NOT NULL,
    style          text NOT NULL,
    symbol         text NOT NULL,
    exchange       text NOT NULL,
    overall_score  integer NOT NULL CHECK (overall_score BETWEEN -100 AND 100),
    verdict        text NOT NULL CHECK (verdict IN ('growth', 'decline', 'neutral')),
    price          double precision NOT NULL,
    change_pct     double precision NOT NULL,
    sparkline      double precision[] NOT NULL,
    result         jsonb NOT NULL,
    -- The last scored candle (open time and close): an unchanged candle is
    -- not scored again, so a repeated scoring task changes nothing.
    candle_time    timestamptz NOT NULL,
    candle_close   double precision NOT NULL,
    updated_at     timestamptz NOT NULL,
    PRIMARY KEY (market, style, symbol)
);
CREATE INDEX analytics_reports_strength ON analytics_reports (style, (abs(overall_score)) DESC);

-- History: one snapshot per scoring that changed the score or the verdict,
-- and at least one per day.
CREATE TABLE analytics_snapshots (
    market             text NOT NULL,
    style              text NOT NULL,
    symbol             text NOT NULL,
    at                 timestamptz NOT NULL,
    overall_score      integer NOT NULL,
    technical_score    integer NOT NULL,
    fundamental_score  integer,
    verdict            text NOT NULL,
    price              double precision NOT NULL,
    PRIMARY KEY (market, style, symbol, at)
);

-- Outbox of verdict changes (default style), written in the transaction
-- that stores the new verdict: webhook delivery reads it, so a change is
-- never lost with Redis. at is the scoring run's time: one row per asset
-- and run (a repeated run of the same task adds nothing).
CREATE TABLE verdict_events (
    id             bigserial PRIMARY KEY,
    market         text NOT NULL,
    symbol         text NOT NULL,
    old_verdict    text NOT NULL,
    new_verdict    text NOT NULL,
    overall_score  integer NOT NULL,
    at             timestamptz NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (market, symbol, at)
);

-- +goose Down
DROP TABLE verdict_events;
DROP TABLE analytics_snapshots;
DROP TABLE analytics_reports;
