package feeds

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/hostbudget"
)

const (
	oandaMaxCount    = 5000
	oandaConcurrency = 4
)

// oanda serves forex/oanda/major and minor from the OANDA v20 REST API.
// The instruments are the 28 pairs of the synthetic universe (7 majors, 21
// crosses). Tickers come from the last 25 hourly mid candles of each pair
// (pricing needs an account id, and has no 24 h change); their volume is
// OANDA's tick volume, as forex has no central traded volume.
type oanda struct {
	log    *slog.Logger
	now    func() time.Time
	api    *apiClient
	majors []string
	minors []string
}

func newOanda(cfg Config) *oanda {
	o := &oanda{
		log:    cfg.Logger.With("feed", NameOanda),
		now:    cfg.Now,
		api:    newAPIClient(NameOanda, NameOanda, cfg.BaseURL(HostOanda), hostbudget.Limit{}, cfg),
		majors: strings.Fields(syntheticForexMajors),
		minors: strings.Fields(syntheticForexMinors),
	}
	token := cfg.OandaToken
	o.api.authorize = func(h http.Header) {
		h.Set("Authorization", "Bearer "+token)
		h.Set("Accept-Datetime-Format", "RFC3339")
	}
	o.api.minInterval = 10 * time.Millisecond // OANDA allows 120 requests per second
	return o
}

// Name implements Provider.
func (o *oanda) Name() string { return NameOanda }

// Supports implements Provider.
func (o *oanda) Supports(c domain.Combination) bool { return oandaServes(c) }

// Symbols implements Provider.
func (o *oanda) Symbols(_ context.Context, c domain.Combination) ([]string, error) {
	if !o.Supports(c) {
		return nil, unsupported(NameOanda, c)
	}
	if c.Instrument == "major" {
		return slices.Clone(o.majors), nil
	}
	return slices.Clone(o.minors), nil
}

// oandaGranularity maps a timeframe to OANDA's granularity.
func oandaGranularity(tf domain.Timeframe) (string, bool) {
	g, ok := map[domain.Timeframe]string{
		domain.TF1m: "M1", domain.TF5m: "M5", domain.TF15m: "M15", domain.TF30m: "M30",
		domain.TF1h: "H1", domain.TF4h: "H4", domain.TF1d: "D", domain.TF1w: "W",
	}[tf]
	return g, ok
}

// Tickers implements Provider.
func (o *oanda) Tickers(ctx context.Context, c domain.Combination) ([]domain.Ticker, error) {
	syms, err := o.Symbols(ctx, c)
	if err != nil {
		return nil, err
	}
	now := o.now().UTC()
	return tickersEach(syms, oandaConcurrency, func(sym string) (*domain.Ticker, error) {
		body, err := o.get(ctx, sym, "H1", url.Values{"count": {"25"}})
		if err != nil {
			return nil, err
		}
		cs, err := parseOandaCandles(body)
		var t domain.Ticker
		if err == nil {
			t, err = oandaTicker(sym, cs, now)
		}
		if err != nil {
			o.log.Warn("feeds: dropping bad ticker row", "symbol", sym, "err", err)
			return nil, nil
		}
		return &t, nil
	})
}

// oandaTicker derives a ticker from hourly candles, oldest first: the last
// close, the change against the close 24 candles earlier, the summed tick
// volume of the last 24 candles. A bad response drops the row, as a bad
// ticker row of other feeds does.
func oandaTicker(sym string, cs []domain.Candle, now time.Time) (domain.Ticker, error) {
	if len(cs) < 2 {
		return domain.Ticker{}, fmt.Errorf("%d hourly candles, need 2: %w", len(cs), errBadField)
	}
	last := cs[len(cs)-1]
	first := cs[max(0, len(cs)-25)]
	var volume float64
	for _, c := range cs[max(1, len(cs)-24):] {
		volume += c.Volume
	}
	t := domain.Ticker{
		Symbol:    sym,
		Price:     last.Close,
		ChangePct: (last.Close/first.Close - 1) * 100,
		Volume:    volume,
		UpdatedAt: minTime(last.Time.Add(time.Hour), now),
	}
	return t, t.Validate()
}

// Candles implements Provider. Daily candles are aligned on UTC midnight
// and weekly ones on Monday, as domain timeframes are.
func (o *oanda) Candles(ctx context.Context, c domain.Combination, symbol string, tf domain.Timeframe, since time.Time, limit int) ([]domain.Candle, error) {
	if err := listedSymbol(ctx, o, c, symbol); err != nil {
		return nil, err
	}
	g, ok := oandaGranularity(tf)
	if !ok {
		return nil, unknownTimeframe(NameOanda, tf)
	}
	if limit <= 0 {
		limit = 500
	}
	limit = min(limit, oandaMaxCount)
	q := url.Values{"count": {strconv.Itoa(limit)}}
	if !since.IsZero() {
		q.Set("from", since.UTC().Format(time.RFC3339))
	}
	cs, err := o.fetch(ctx, symbol, g, q)
	if err != nil {
		return nil, err
	}
	return clipCandles(cs, since, limit), nil
}

// get fetches mid candles of one instrument, aligned on UTC days and
// Monday weeks.
func (o *oanda) get(ctx context.Context, instrument, granularity string, q url.Values) ([]byte, error) {
	q.Set("granularity", granularity)
	q.Set("price", "M")
	q.Set("dailyAlignment", "0")
	q.Set("alignmentTimezone", "UTC")
	q.Set("weeklyAlignment", "Monday")
	return o.api.get(ctx, "/v3/instruments/"+url.PathEscape(instrument)+"/candles", q)
}

// fetch gets and parses mid candles of one instrument.
func (o *oanda) fetch(ctx context.Context, instrument, granularity string, q url.Values) ([]domain.Candle, error) {
	body, err := o.get(ctx, instrument, granularity, q)
	if err != nil {
		return nil, err
	}
	cs, err := parseOandaCandles(body)
	if err != nil {
		return nil, rejectCandles(o.log, NameOanda, "candles", instrument, granularity, err)
	}
	return cs, nil
}

type oandaCandles struct {
	Instrument string `json:"instrument"`
	Candles    []struct {
		Complete bool       `json:"complete"`
		Volume   *float64   `json:"volume"`
		Time     string     `json:"time"`
		Mid      *oandaOHLC `json:"mid"`
	} `json:"candles"`
}

type oandaOHLC struct {
	O, H, L, C string
}

// parseOandaCandles parses a v20 candles response (price=M), oldest first.
func parseOandaCandles(body []byte) ([]domain.Candle, error) {
	var r oandaCandles
	if err := decodeJSON(body, &r); err != nil {
		return nil, err
	}
	out := make([]domain.Candle, 0, len(r.Candles))
	for i, c := range r.Candles {
		ts, err := time.Parse(time.RFC3339Nano, c.Time)
		if err != nil {
			return nil, fmt.Errorf("candle %d: time %q: %w", i, c.Time, errBadField)
		}
		if c.Mid == nil || c.Volume == nil {
			return nil, fmt.Errorf("candle %d: mid or volume: missing: %w", i, errBadField)
		}
		k := domain.Candle{Time: ts.UTC(), Volume: *c.Volume}
		for _, f := range []struct {
			name, raw string
			dst       *float64
		}{{"o", c.Mid.O, &k.Open}, {"h", c.Mid.H, &k.High}, {"l", c.Mid.L, &k.Low}, {"c", c.Mid.C, &k.Close}} {
			if *f.dst, err = parseDecimal(f.name, f.raw); err != nil {
				return nil, fmt.Errorf("candle %d: %w", i, err)
			}
		}
		out = append(out, k)
	}
	if err := domain.ValidateCandles(out); err != nil {
		return nil, err
	}
	return out, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
