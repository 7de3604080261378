package api

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/store"
)

// DataSource is where the candles behind a score come from.
type DataSource struct {
	Feed      string           `json:"feed" doc:"The combination whose exchange candles were scored: market/exchange/instrument" example:"crypto/binance/spot"`
	Exchange  string           `json:"exchange" example:"binance"`
	Timeframe domain.Timeframe `json:"timeframe" doc:"The candles' timeframe (the style's)" example:"4h"`
	DataFeed  string           `json:"data_feed,omitempty" doc:"The market-data feed the candles came from: the provider, and for stocks its feed (alpaca/iex: the IEX exchange alone, a few percent of US volume, so volumes are IEX's; alpaca/sip: every US exchange). Omitted when not known" example:"binance"`
}

// DataQuality is how fresh and how complete the data behind a score is;
// every report and analytics list item carries it, so a stale series is
// visible in the answer itself.
type DataQuality struct {
	AsOf         time.Time `json:"as_of" doc:"Close time of the last candle the score used (RFC 3339 UTC): its open time plus the style's timeframe, or the session's close when the market closed within that candle (a stock's last 4h candle of the day ends at the 16:00 New York close); later than updated_at when that candle was still open" example:"2026-11-22T12:00:00Z"`
	CandleClosed bool      `json:"candle_closed" doc:"Whether that candle had closed when the asset was scored; false: the score read a still-open candle" example:"true"`
	// DataAgeSeconds is written into the cached body at each answer (see agedBody).
	DataAgeSeconds int64      `json:"data_age_seconds" minimum:"0" doc:"Whole seconds from the newest data the score used (the candle's close, or the scoring time when the candle was open) to this answer. It is computed at each answer and does not change the entity tag" example:"95"`
	CandlesUsed    int        `json:"candles_used" minimum:"0" doc:"Candles of the timeframe the score read (at most 500); 0 when not recorded" example:"500"`
	Source         DataSource `json:"source"`
	// The market's hours at the answer's build (a cached body follows an
	// open or a close within the cache's TTL, 10 s).
	MarketHours
}

// dataQuality describes what rec was scored from (and by dataFeed, the
// feed it came from), its market following cal, at now; instrument stands in for the record's when it has none
// (stored before it was recorded). It returns the instant
// data_age_seconds counts from.
func dataQuality(rec store.AnalyticsRecord, st analytics.Style, instrument string, dataFeed func(domain.Combination) string, cal domain.Calendar, now time.Time) (DataQuality, time.Time) {
	tf := st.Timeframe()
	closes := candleEnd(rec.CandleTime, tf, cal)
	closed := !rec.UpdatedAt.Before(closes)
	from := closes
	if !closed {
		from = rec.UpdatedAt
	}
	if rec.Instrument != "" {
		instrument = rec.Instrument
	}
	feed := string(rec.Market) + "/" + rec.Exchange + "/" + instrument
	src := DataSource{Feed: feed, Exchange: rec.Exchange, Timeframe: tf}
	if dataFeed != nil {
		src.DataFeed = dataFeed(domain.Combination{Market: rec.Market, Exchange: rec.Exchange, Instrument: instrument})
	}
	return DataQuality{AsOf: closes, CandleClosed: closed, CandlesUsed: rec.CandlesUsed, Source: src, MarketHours: marketHours(cal.At(now))}, from
}

// candleEnd is when the candle of tf opening at open stopped trading: its
// close, or the close of the session that ended within it (the last 4h
// candle of a stock's day, a forex week's last candle). A score on that
// candle after the session's close read its final state: the candle is
// closed, and its age counts from the session's close.
func candleEnd(open time.Time, tf domain.Timeframe, cal domain.Calendar) time.Time {
	end := open.Add(tf.Duration())
	if st := cal.At(end.Add(-1)); !st.Open && st.Session.Close.After(open) && st.Session.Close.Before(end) {
		return st.Session.Close
	}
	return end
}

// sourceInstrument is the instrument of a market's first analytics source
// ("" when the market has none here), for the records saved before a
// record kept its own.
func (s *Server) sourceInstrument(m domain.Market) string {
	if srcs := domain.AnalyticsSources(s.cfg.Region, m, s.cfg.Served); len(srcs) > 0 {
		return srcs[0].Instrument
	}
	return ""
}

// agedBody is a cached body whose data_age_seconds values depend on the
// clock: it is encoded once with each age 0, and ages records where each
// 0 is and the instant its age counts from. Ages are whole seconds of the
// clock, so the body with the ages written in changes once a second: it is
// built by the first answer of a second and shared by the others, and a
// hot read stays a map lookup. The entity tag is the encoded body's, since
// the age changes every second while the data does not.
type agedBody struct {
	readcache.Body
	ages []ageSlot
	// current is the body of the latest second answered (shared by the
	// copies of this value that the cache hands out).
	current *atomic.Pointer[agedAt]
}

// agedAt is a body with its ages written in as of one second.
type agedAt struct {
	second int64
	bytes  []byte
	length string
}

type ageSlot struct {
	offset int // of the placeholder digit in Bytes
	from   time.Time
}

var agePlaceholder = []byte(`"data_age_seconds":0`)

// newAgedBody finds the data_age_seconds placeholders of b, which must be
// exactly one per instant of from, in the same order. A placeholder
// cannot occur inside a JSON string: the quote before the colon would be
// escaped there.
func newAgedBody(b []byte, modified time.Time, from []time.Time, tagged ...[]byte) (agedBody, error) {
	if len(tagged) == 0 {
		tagged = [][]byte{b}
	}
	out := agedBody{Body: readcache.NewBodyTagged(b, modified, tagged...), ages: make([]ageSlot, 0, len(from)),
		current: new(atomic.Pointer[agedAt])}
	rest, base := b, 0
	for {
		i := bytes.Index(rest, agePlaceholder)
		if i < 0 {
			break
		}
		if len(out.ages) == len(from) {
			return agedBody{}, fmt.Errorf("api: more data_age_seconds fields than the %d expected", len(from))
		}
		off := base + i + len(agePlaceholder) - 1
		out.ages = append(out.ages, ageSlot{offset: off, from: from[len(out.ages)]})
		rest, base = b[off+1:], off+1
	}
	if len(out.ages) != len(from) {
		return agedBody{}, fmt.Errorf("api: %d data_age_seconds fields, expected %d", len(out.ages), len(from))
	}
	if len(out.ages) > 0 {
		out.ETag = weakTag(out.ETag)
	}
	return out, nil
}

// weakTag is the weak form of an entity tag (RFC 9110 §8.8.1): the tag
// of a body whose ages move with the clock while its data stays the same,
// so two answers with the tag are equivalent, not byte for byte equal.
func weakTag(tag string) string {
	if strings.HasPrefix(tag, "W/") {
		return tag
	}
	return "W/" + tag
}

// appendAt appends the body with its ages as of now to dst.
func (a agedBody) appendAt(dst []byte, now time.Time) []byte {
	prev := 0
	for _, s := range a.ages {
		dst = append(dst, a.Bytes[prev:s.offset]...)
		dst = strconv.AppendInt(dst, ageSeconds(s.from, now), 10)
		prev = s.offset + 1
	}
	return append(dst, a.Bytes[prev:]...)
}

// at is the body with its ages as of now and its length in decimal.
func (a agedBody) at(now time.Time) ([]byte, string) {
	if len(a.ages) == 0 {
		return a.Bytes, a.Length
	}
	sec := now.Unix()
	if c := a.current.Load(); c != nil && c.second == sec {
		return c.bytes, c.length
	}
	b := a.appendAt(make([]byte, 0, len(a.Bytes)+8*len(a.ages)), now)
	c := &agedAt{second: sec, bytes: b, length: strconv.Itoa(len(b))}
	a.current.Store(c) // two answers of a new second may both build it: the same bytes
	return c.bytes, c.length
}

// ageSeconds is the whole seconds of the clock from from to now (both
// truncated to the second), never negative.
func ageSeconds(from, now time.Time) int64 {
	return max(now.Unix()-from.Unix(), 0)
}

// respondAged is respond for a body with ages: a 200 carries them as of
// the answer.
func (s *Server) respondAged(ctx context.Context, cond *ConditionalParams, b agedBody, f freshness) *dataOutput {
	out := s.respond(ctx, cond, b.Body, f)
	if out.Status == 200 && len(b.ages) > 0 {
		out.Body, out.ContentLength = b.at(s.now(ctx))
	}
	return out
}
