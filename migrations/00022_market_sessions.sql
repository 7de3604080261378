-- +goose Up
-- Market calendars. The sessions of a market that trades in sessions listed
-- by its feed (US stocks: Alpaca's /v2/calendar, or the synthetic feed's
-- rules): one row per trading day with its open and close instants (an early
-- close is an earlier close_at; a holiday has no row). market_calendars says
-- which trading days the stored rows cover: a day of that range without a
-- row is a day the market does not trade, a day outside it is unknown (every
-- role then treats the market as open, as before calendars existed). Written
-- by the worker's calendar:refresh task, read by every role. Forex and
-- crypto have calendars by rule and no rows.
CREATE TABLE market_sessions (
    market   text        NOT NULL,
    day      date        NOT NULL,
    open_at  timestamptz NOT NULL,
    close_at timestamptz NOT NULL,
    PRIMARY KEY (market, day),
    CHECK (open_at < close_at)
);

CREATE TABLE market_calendars (
    market       text        PRIMARY KEY,
    first_day    date        NOT NULL,
    last_day     date        NOT NULL,
    source       text        NOT NULL,
    refreshed_at timestamptz NOT NULL,
    CHECK (first_day <= last_day)
);

-- +goose Down
DROP TABLE market_calendars;
DROP TABLE market_sessions;
