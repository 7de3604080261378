package feeds

import (
	"context"
	"time"

	"github.com/marketscreener/market/domain"
)

// CalendarProvider is implemented by feeds that publish the sessions of a
// market that trades in sessions (the US stock exchanges': `alpaca` from
// the trading API's calendar, `synthetic` by the exchanges' rules).
// Optional: check with a type assertion. Forex and crypto need none: their
// calendars are rules (domain.RuleCalendar).
type CalendarProvider interface {
	// Schedule returns market m's sessions of the trading days from first
	// to last (dates as 00:00 UTC). A day of the returned range without a
	// session is a day without trading; the range ends before last when the
	// provider publishes no further. A market the provider has no sessions
	// for is ErrUnsupported.
	Schedule(ctx context.Context, m domain.Market, first, last time.Time) (domain.Schedule, error)
}
