-- +goose Up
-- Progress of operator backfills, so an interrupted backfill resumes where
-- it stopped: candles of (series) are stored from start_at up to done_until.
CREATE TABLE backfill_progress (
    market      text NOT NULL,
    exchange    text NOT NULL,
    symbol      text NOT NULL,
    timeframe   text NOT NULL,
    start_at    timestamptz NOT NULL,
    done_until  timestamptz NOT NULL,
    finished    boolean NOT NULL DEFAULT false,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (market, exchange, symbol, timeframe)
);

-- +goose Down
DROP TABLE backfill_progress;
