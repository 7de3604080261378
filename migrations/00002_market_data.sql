-- +goose Up
-- Screener rows: the live state of every instrument of a combination. A
-- combination's rows are replaced in one transaction by each ingest.
CREATE TABLE tickers (
    market      text NOT NULL,
    exchange    text NOT NULL,
    instrument  text NOT NULL,
    symbol      text NOT NULL,
    price       double precision NOT NULL CHECK (price > 0),
    change_pct  double precision NOT NULL,
    volume      double precision NOT NULL CHECK (volume >= 0),
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (market, exchange, instrument, symbol)
);

-- Candles of the exchange's primary instrument (spot for crypto), keyed so
-- that re-ingesting upserts: (market, exchange, symbol, timeframe, open time).
CREATE TABLE candles (
    market     text NOT NULL,
    exchange   text NOT NULL,
    symbol     text NOT NULL,
    timeframe  text NOT NULL,
    open_time  timestamptz NOT NULL,
    open       double precision NOT NULL,
    high       double precision NOT NULL,
    low        double precision NOT NULL,
    close      double precision NOT NULL,
    volume     double precision NOT NULL CHECK (volume >= 0),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (market, exchange, symbol, timeframe, open_time)
);

-- Feed health per combination and kind of data (tickers, candles:<tf>).
CREATE TABLE feed_health (
    market           text NOT NULL,
    exchange         text NOT NULL,
    instrument       text NOT NULL,
    kind             text NOT NULL,
    last_success_at  timestamptz,
    last_error_at    timestamptz,
    last_error       text,
    PRIMARY KEY (market, exchange, instrument, kind)
);

-- +goose Down
DROP TABLE feed_health;
DROP TABLE candles;
DROP TABLE tickers;
