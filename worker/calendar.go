package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"

	"github.com/marketscreener/market/calendar"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/store"
)

// TypeCalendarRefresh stores the sessions the feeds publish for the
// markets that trade in sessions (stocks).
const TypeCalendarRefresh = "calendar:refresh"

// CalendarKind is the feed-health kind of a market's calendar refresh
// (marketd feed-health, marketd_feed_* series): it is not a market-data
// series, so no stale-feed alert or 502 reads it.
const CalendarKind = store.FeedKindCalendar

// CalendarPayload is a refresh task's tick (for logs and the task id).
type CalendarPayload struct {
	Tick time.Time `json:"tick"`
}

// NewCalendarRefreshTask returns the calendar refresh of a tick.
func NewCalendarRefreshTask(tick time.Time) *asynq.Task {
	return newTask(TypeCalendarRefresh, CalendarPayload{Tick: tick.UTC()})
}

// CalendarStore is where the sessions go (store.DB).
type CalendarStore interface {
	SaveSchedule(ctx context.Context, s domain.Schedule, source string, at time.Time) error
	RecordFeedSuccess(ctx context.Context, c domain.Combination, kind string, at time.Time) error
	RecordFeedError(ctx context.Context, c domain.Combination, kind string, at time.Time, msg string) error
}

// CalendarJob asks the feed of each market that trades in sessions for
// the sessions of the window every role reads (calendar.DaysBehind to
// calendar.DaysAhead around today) and stores them: daily from the
// scheduler and once when a worker starts. Storing the same sessions
// twice changes nothing.
type CalendarJob struct {
	Store  CalendarStore
	Feeds  *feeds.Registry
	Region string
	Served domain.Served
	Logger *slog.Logger
	Now    func() time.Time
}

// Register adds the refresh handler to a worker.
func (j *CalendarJob) Register(w *Worker) {
	w.Handle(TypeCalendarRefresh, asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error { return j.Refresh(ctx) }))
}

func (j *CalendarJob) logger() *slog.Logger {
	if j.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return j.Logger
}

// Refresh stores the sessions of every served market without a rule
// calendar whose feed publishes them. A market no feed publishes sessions
// for keeps no calendar: it counts as open, as it did before calendars.
func (j *CalendarJob) Refresh(ctx context.Context) error {
	var errs []error
	for _, m := range domain.Markets {
		if _, ok := domain.RuleCalendar(m); ok {
			continue
		}
		c, p, ok := j.provider(m)
		if !ok {
			continue
		}
		if err := j.refresh(ctx, m, c, p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// provider is the first served combination of m in the catalogue whose
// feed publishes sessions, and that feed: the market's exchanges share
// one calendar (the US stock exchanges keep the same days and hours).
func (j *CalendarJob) provider(m domain.Market) (domain.Combination, feeds.CalendarProvider, bool) {
	for _, c := range domain.Catalogue(j.Region) {
		if c.Market != m || !j.Served.Has(c) {
			continue
		}
		if p, ok := j.Feeds.For(c); ok {
			if cp, ok := p.(feeds.CalendarProvider); ok {
				return c, cp, true
			}
		}
	}
	return domain.Combination{}, nil, false
}

func (j *CalendarJob) refresh(ctx context.Context, m domain.Market, c domain.Combination, p feeds.CalendarProvider) error {
	now := j.Now()
	today := domain.TradingDay(now)
	s, err := p.Schedule(ctx, m, today.AddDate(0, 0, -calendar.DaysBehind), today.AddDate(0, 0, calendar.DaysAhead))
	if err == nil {
		err = ours(j.Store.SaveSchedule(ctx, s, feedName(j.Feeds, c), now))
	}
	if err != nil {
		var o ourSide
		if !errors.As(err, &o) && ctx.Err() == nil {
			_ = j.Store.RecordFeedError(context.WithoutCancel(ctx), c, CalendarKind, now, err.Error())
		}
		return fmt.Errorf("worker: calendar of %s from %s: %w", m, c, err)
	}
	_ = j.Store.RecordFeedSuccess(ctx, c, CalendarKind, now)
	j.logger().Info("market calendar refreshed", "market", m, "feed", feedName(j.Feeds, c),
		"covers", s.First.Format(time.DateOnly)+".."+s.Last.Format(time.DateOnly), "sessions", len(s.Sessions))
	return nil
}

func feedName(r *feeds.Registry, c domain.Combination) string {
	if p, ok := r.For(c); ok {
		return p.Name()
	}
	return ""
}

// RunAtStart refreshes the calendars when a worker starts, so a new
// deployment knows its sessions before the first daily tick; a failure
// is tried again with back-off (up to about an hour), then left to the
// daily tick.
func (j *CalendarJob) RunAtStart(ctx context.Context) error {
	wait := 30 * time.Second
	for attempt := 1; ; attempt++ {
		err := j.Refresh(ctx)
		if err == nil || ctx.Err() != nil {
			return nil
		}
		if attempt == 7 {
			j.logger().Warn("market calendar refresh at start failed; the daily refresh will try again", "err", err)
			return nil
		}
		j.logger().Warn("market calendar refresh at start failed; retrying", "err", err, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		wait *= 2
	}
}
