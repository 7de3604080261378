// Package calendar keeps every market's trading calendar in memory for the
// roles that ask it: the api (502s, the market_open fields), the scheduler
// (what to poll) and every role's metrics (marketd_market_open). Crypto
// and forex have theirs by rule (domain.RuleCalendar); the sessions of
// stocks come from Postgres, where the worker's calendar:refresh task
// stores what the feed publishes, and are reloaded every minute: no role
// but the worker asks a feed, and every role reads the same calendar.
package calendar

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/marketscreener/market/domain"
)

// ScheduleReader reads the stored sessions of a market (store.DB).
type ScheduleReader interface {
	Schedule(ctx context.Context, m domain.Market, first, last time.Time) (domain.Schedule, bool, error)
}

// The window of trading days a Book holds, around today: enough behind to
// name the last session after any closure, and the year ahead the worker
// stores.
const (
	DaysBehind = 30
	DaysAhead  = 400
)

// DefaultReload is how often a Book reads the stored sessions again: a
// refresh by the worker reaches every role within it.
const DefaultReload = time.Minute

// Config configures a Book.
type Config struct {
	Store  ScheduleReader
	Now    func() time.Time
	Logger *slog.Logger
	// Reload is how often Run reads the sessions again; 0 means DefaultReload.
	Reload time.Duration
}

// Book is the calendars of every market. Until the stored sessions of a
// market are read (or while none are stored) its calendar knows nothing
// and the market counts as open: a missing calendar leaves polling, 502s
// and alerts as they were without calendars. A failed reload keeps the
// calendar read last.
type Book struct {
	cfg Config

	mu      sync.RWMutex
	loaded  map[domain.Market]*domain.SessionCalendar
	summary map[domain.Market]string // for the log: what was loaded last
	// unknown is the calendar of a market with nothing loaded, made once:
	// the api asks on every request.
	unknown *domain.SessionCalendar
}

// New returns a Book; Run (or Load) reads the sessions.
func New(cfg Config) *Book {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Reload <= 0 {
		cfg.Reload = DefaultReload
	}
	return &Book{cfg: cfg, loaded: map[domain.Market]*domain.SessionCalendar{}, summary: map[domain.Market]string{},
		unknown: &domain.SessionCalendar{}}
}

// Calendar implements domain.MarketHours.
func (b *Book) Calendar(m domain.Market) domain.Calendar {
	if c, ok := domain.RuleCalendar(m); ok {
		return c
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	if c := b.loaded[m]; c != nil {
		return c
	}
	return b.unknown
}

// Load reads the stored sessions of every market that has no rule
// calendar, around today. A market's read that fails keeps what it had.
func (b *Book) Load(ctx context.Context) error {
	today := domain.TradingDay(b.cfg.Now())
	first, last := today.AddDate(0, 0, -DaysBehind), today.AddDate(0, 0, DaysAhead)
	var firstErr error
	for _, m := range domain.Markets {
		if _, ok := domain.RuleCalendar(m); ok {
			continue
		}
		s, ok, err := b.cfg.Store.Schedule(ctx, m, first, last)
		var c *domain.SessionCalendar
		if err == nil && ok {
			c, err = domain.NewSessionCalendar(s)
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		summary := "none stored"
		if c != nil {
			summary = s.First.Format(time.DateOnly) + ".." + s.Last.Format(time.DateOnly)
		}
		b.mu.Lock()
		b.loaded[m] = c
		changed := b.summary[m] != summary
		b.summary[m] = summary
		b.mu.Unlock()
		if changed {
			b.cfg.Logger.Info("market calendar loaded", "market", m, "covers", summary, "sessions", len(s.Sessions))
		}
	}
	return firstErr
}

// Run loads the sessions at once, then every Reload, until ctx ends.
func (b *Book) Run(ctx context.Context) error {
	t := time.NewTicker(b.cfg.Reload)
	defer t.Stop()
	for {
		if err := b.Load(ctx); err != nil && ctx.Err() == nil {
			b.cfg.Logger.Warn("reading the market calendars failed; keeping the last ones read", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
