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
)

func (c Class) String() string {
	if c == Bulk {
		return "bulk"
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
