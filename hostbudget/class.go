package hostbudget

import "context"

// Class is a request's priority on its host's budget. History loads come
// in bursts of minutes (a cold start's catch-up is tens of thousands of
// weight on Binance spot); what keeps served data current must still get
// through inside its patience while one runs. So bulk work books only
// BulkShare of each window's planned weight, and the rest of every window
// stays free for urgent work: bulk work cannot starve it, whichever
// process books first. Urgent work may take the whole planned budget.
type Class int

const (
	// Urgent is work that keeps served data current: ticker refreshes,
	// fundamentals, scheduled candle polls, the repair of a stream's gap
	// after a reconnect, symbol listings. The default.
	Urgent Class = iota
	// Bulk is history loading: backfill pages, the push feeds' REST catch-up
	// pass, the initial history of series the push feeds follow.
	Bulk
	// Live is the read of candles that have just closed: the 1m bars
	// polled every minute, a scored timeframe's poll once one of its
	// candles has closed. On a host whose Limit has a Tick (the polls'
	// period), the window that opens each tick is kept for it: Bulk books
	// none of that window and Urgent at most TickUrgentShare of it, so a
	// minute's bars are not booked behind the screener's refresh and the
	// history loads. Elsewhere it is Urgent.
	Live
)

func (c Class) String() string {
	switch c {
	case Bulk:
		return "bulk"
	case Live:
		return "live"
	}
	return "urgent"
}

type classKey struct{}

// WithClass returns ctx whose provider requests book as class c: the
// class crosses the feeds' interfaces with the request's context, as its
// deadline does.
func WithClass(ctx context.Context, c Class) context.Context {
	return context.WithValue(ctx, classKey{}, c)
}

// ClassOf is the class of ctx's requests: Urgent unless WithClass said
// otherwise.
func ClassOf(ctx context.Context) Class {
	c, _ := ctx.Value(classKey{}).(Class)
	return c
}
