-- +goose Up
-- What `marketd import` has loaded: one row per archive file of a candle
-- series, written in the transaction that stores the file's candles, so an
-- interrupted import resumes after the last committed file and a second
-- run skips what is here. sha256 tells a file replaced in the archive
-- (import --recheck); first_open and last_open let the gap report span
-- files loaded by earlier runs. The candles go through a temporary staging
-- table of the importing session (COPY, then one INSERT ... ON CONFLICT).
CREATE TABLE candle_import_files (
    source      text NOT NULL,
    market      text NOT NULL,
    exchange    text NOT NULL,
    symbol      text NOT NULL,
    timeframe   text NOT NULL,
    period      text NOT NULL,
    sha256      text NOT NULL,
    candles     integer NOT NULL,
    first_open  timestamptz,
    last_open   timestamptz,
    imported_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, market, exchange, symbol, timeframe, period)
);

-- +goose Down
DROP TABLE candle_import_files;
