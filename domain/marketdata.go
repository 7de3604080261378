package domain

import (
	"math"
	"strings"
	"time"
)

// Timeframe is a candle interval.
type Timeframe string

// The supported timeframes.
const (
	TF1m  Timeframe = "1m"
	TF5m  Timeframe = "5m"
	TF15m Timeframe = "15m"
	TF30m Timeframe = "30m"
	TF1h  Timeframe = "1h"
	TF4h  Timeframe = "4h"
	TF1d  Timeframe = "1d"
	TF1w  Timeframe = "1w"
)

// Timeframes lists every supported timeframe, shortest first.
var Timeframes = []Timeframe{TF1m, TF5m, TF15m, TF30m, TF1h, TF4h, TF1d, TF1w}

// ParseTimeframe parses a timeframe as written on the wire.
func ParseTimeframe(s string) (Timeframe, bool) {
	for _, tf := range Timeframes {
		if string(tf) == s {
			return tf, true
		}
	}
	return "", false
}

// Duration is the length of one candle.
func (tf Timeframe) Duration() time.Duration {
	switch tf {
	case TF1m:
		return time.Minute
	case TF5m:
		return 5 * time.Minute
	case TF15m:
		return 15 * time.Minute
	case TF30m:
		return 30 * time.Minute
	case TF1h:
		return time.Hour
	case TF4h:
		return 4 * time.Hour
	case TF1d:
		return 24 * time.Hour
	case TF1w:
		return 7 * 24 * time.Hour
	}
	return 0
}

// Truncate returns the open time of the candle containing t (UTC; weeks
// open on Monday 00:00 UTC as on most exchanges).
func (tf Timeframe) Truncate(t time.Time) time.Time {
	t = t.UTC()
	if tf == TF1w {
		d := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		wd := (int(d.Weekday()) + 6) % 7 // Monday = 0
		return d.AddDate(0, 0, -wd)
	}
	return t.Truncate(tf.Duration())
}

// Candle is one OHLCV bar; Time is its open time (UTC).
type Candle struct {
	Time   time.Time
	Open   float64
	High   float64
	Low    float64
	Close  float64
	Volume float64
}

// Validate rejects candles no feed should ever deliver: non-finite or
// non-positive prices, negative volume, high/low that do not bound open and close.
func (c Candle) Validate() error {
	// x−x is 0 for every finite x, NaN for NaN and ±Inf: one test a
	// value (every stored and every scored candle passes here).
	if c.Open-c.Open != 0 || c.High-c.High != 0 || c.Low-c.Low != 0 || c.Close-c.Close != 0 || c.Volume-c.Volume != 0 {
		return Errorf(EINVALID, "candle %s: non-finite value", c.Time.Format(time.RFC3339))
	}
	if c.Time.IsZero() {
		return Errorf(EINVALID, "candle without open time")
	}
	if c.Open <= 0 || c.High <= 0 || c.Low <= 0 || c.Close <= 0 {
		return Errorf(EINVALID, "candle %s: non-positive price", c.Time.Format(time.RFC3339))
	}
	if c.Volume < 0 {
		return Errorf(EINVALID, "candle %s: negative volume", c.Time.Format(time.RFC3339))
	}
	if c.High < c.Low || c.High < math.Max(c.Open, c.Close) || c.Low > math.Min(c.Open, c.Close) {
		return Errorf(EINVALID, "candle %s: high/low do not bound open/close", c.Time.Format(time.RFC3339))
	}
	return nil
}

// ValidateCandles checks every candle and that open times strictly increase.
func ValidateCandles(cs []Candle) error {
	for i, c := range cs {
		if err := c.Validate(); err != nil {
			return err
		}
		if i > 0 && !c.Time.After(cs[i-1].Time) {
			return Errorf(EINVALID, "candles out of order at %s", c.Time.Format(time.RFC3339))
		}
	}
	return nil
}

// Ticker is one screener row: the live state of one instrument.
type Ticker struct {
	Symbol    string  // canonical symbol
	Price     float64 // last price
	ChangePct float64 // percent change over 24 h
	Volume    float64 // 24 h volume in quote currency
	UpdatedAt time.Time
}

// Validate rejects tickers with non-finite numbers, a non-positive price or
// negative volume.
func (t Ticker) Validate() error {
	for _, v := range []float64{t.Price, t.ChangePct, t.Volume} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return Errorf(EINVALID, "ticker %s: non-finite value", t.Symbol)
		}
	}
	if t.Symbol == "" {
		return Errorf(EINVALID, "ticker without symbol")
	}
	if t.Price <= 0 {
		return Errorf(EINVALID, "ticker %s: non-positive price", t.Symbol)
	}
	if t.Volume < 0 {
		return Errorf(EINVALID, "ticker %s: negative volume", t.Symbol)
	}
	return nil
}

// NormalizeSymbol turns a client's symbol into the canonical form:
// BASE_QUOTE upper-case for crypto and forex ("btc/usdt", "BTC_USDT" →
// "BTC_USDT"), the upper-case ticker for stocks ("aapl" → "AAPL",
// "brk.b" → "BRK.B"). ok is false when the text cannot be a symbol.
func NormalizeSymbol(m Market, raw string) (string, bool) {
	s := strings.ToUpper(strings.TrimSpace(raw))
	if s == "" || len(s) > 32 {
		return "", false
	}
	if m == Stocks {
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !(('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || c == '.' || c == '-') {
				return "", false
			}
		}
		return s, true
	}
	slash := strings.IndexByte(s, '/') >= 0
	if slash {
		s = strings.Replace(s, "/", "_", 1)
	}
	base, quote, found := strings.Cut(s, "_")
	if !found || !isAlnumUpper(base) || !isAlnumUpper(quote) {
		return "", false
	}
	if !slash {
		return s, true // already BASE_QUOTE: no new string
	}
	return base + "_" + quote, true
}

func isAlnumUpper(s string) bool {
	if s == "" || len(s) > 15 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')) {
			return false
		}
	}
	return true
}
