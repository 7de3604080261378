package api

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/marketscreener/market/domain"
)

// Market hours in the answers. A market that is closed (stocks outside
// the New York session, forex at the weekend) has no new data until it
// opens: its last session's rows and candles are served, never a 502 for
// their age, and the answers say why the data is old: the X-Market-*
// headers of the screener and the candles, and market_open, session_close
// and next_open beside the data-quality fields of the analytics. While
// the market trades, the staleness bounds count from the later of the
// data and the session's open: the first minutes of a session are not
// held against a feed.

// marketState is market m's state at the request's instant.
func (s *Server) marketState(ctx context.Context, m domain.Market) domain.MarketState {
	return s.calendar(m).At(s.now(ctx))
}

// calendar is market m's calendar (around the clock without Hours).
func (s *Server) calendar(m domain.Market) domain.Calendar {
	if s.cfg.Hours == nil {
		return domain.AroundTheClock{}
	}
	return s.cfg.Hours.Calendar(m)
}

// staleFrom is the instant from which the age of data last updated at
// updated counts against its staleness bound: the session's open when the
// data is older (a stock's Friday close on Monday morning).
func staleFrom(updated time.Time, st domain.MarketState) time.Time {
	if st.Session.Open.After(updated) {
		return st.Session.Open
	}
	return updated
}

// The X-Market-* response headers.
const (
	headerMarketOpen   = "X-Market-Open"
	headerSessionClose = "X-Market-Session-Close"
	headerNextOpen     = "X-Market-Next-Open"
)

// marketHeaderValues are a market state's header values, formatted once
// per state (they change at an open or a close, not per request).
type marketHeaderValues struct {
	close, next        time.Time
	open, known        bool
	openText           string
	closeText, nextRFC string
}

// marketHeaderCache holds the last values of each market.
type marketHeaderCache [3]atomic.Pointer[marketHeaderValues]

func (c *marketHeaderCache) values(m domain.Market, st domain.MarketState) *marketHeaderValues {
	i := slices.Index(domain.Markets, m)
	if i < 0 || i >= len(c) {
		return formatMarketHeaders(st)
	}
	if v := c[i].Load(); v != nil && v.open == st.Open && v.known == st.Known && v.close.Equal(st.Session.Close) && v.next.Equal(st.NextOpen) {
		return v
	}
	v := formatMarketHeaders(st)
	c[i].Store(v)
	return v
}

func formatMarketHeaders(st domain.MarketState) *marketHeaderValues {
	v := &marketHeaderValues{open: st.Open, known: st.Known, close: st.Session.Close, next: st.NextOpen, openText: "true"}
	if !st.Open {
		v.openText = "false"
	}
	if !st.Session.IsZero() {
		v.closeText = st.Session.Close.UTC().Format(time.RFC3339)
	}
	if !st.NextOpen.IsZero() {
		v.nextRFC = st.NextOpen.UTC().Format(time.RFC3339)
	}
	return v
}

// withMarketHeaders sets out's X-Market-* headers for market m in state st.
func (s *Server) withMarketHeaders(out *dataOutput, m domain.Market, st domain.MarketState) *dataOutput {
	v := s.marketHeaders.values(m, st)
	out.MarketOpen, out.SessionClose, out.NextOpen = v.openText, v.closeText, v.nextRFC
	return out
}

// MarketHours says whether the asset's market trades at the answer and,
// for one that closes, when its session ends or ended and when the next
// one opens: why a closed market's data is old.
type MarketHours struct {
	MarketOpen   bool       `json:"market_open" doc:"Whether the asset's market trades at this answer (crypto: always; stocks: the New York session, 09:30-16:00 or 13:00 on an early close, not on holidays; forex: from Sunday to Friday 17:00 New York time). While it is closed the data is its last session's: as_of stays at or before the session's close and data_age_seconds keeps growing until the next open" example:"false"`
	SessionClose *time.Time `json:"session_close" nullable:"true" doc:"Close of the market's current session or, while it is closed, of its last one (RFC 3339 UTC); null for crypto, which never closes, and when the service does not know the market's calendar" example:"2026-11-27T18:00:00Z"`
	NextOpen     *time.Time `json:"next_open" nullable:"true" doc:"While the market is closed, when its next session opens (RFC 3339 UTC); null while it trades, for crypto, and when not known" example:"2026-11-30T14:30:00Z"`
}

// marketHours is the MarketHours of state st.
func marketHours(st domain.MarketState) MarketHours {
	h := MarketHours{MarketOpen: st.Open}
	if !st.Session.IsZero() {
		c := st.Session.Close.UTC()
		h.SessionClose = &c
	}
	if !st.Open && !st.NextOpen.IsZero() {
		n := st.NextOpen.UTC()
		h.NextOpen = &n
	}
	return h
}

// documentMarketHeaders keeps the X-Market-* headers (fields of every
// dataOutput) only in the documentation of the operations that send them:
// the screener and the candles, whose bodies are the contract's arrays.
func (s *Server) documentMarketHeaders() {
	for _, item := range s.humaAPI.OpenAPI().Paths {
		op := item.Get
		if op == nil || op.Responses["200"] == nil {
			continue
		}
		if op.OperationID == "get-screener" || op.OperationID == "get-ohlcv" || op.OperationID == "get-ohlcv-slash-symbol" {
			continue
		}
		for _, h := range []string{headerMarketOpen, headerSessionClose, headerNextOpen} {
			delete(op.Responses["200"].Headers, h)
		}
	}
}
