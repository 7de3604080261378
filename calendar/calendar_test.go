package calendar_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/marketscreener/market/calendar"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/store/storetest"
)

// TestBookReadsStoredSessions: stocks follow the stored sessions once
// read, and count as open (unknown) before; forex and crypto follow their
// rules whatever is stored.
func TestBookReadsStoredSessions(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	sat := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	b := calendar.New(calendar.Config{Store: db, Now: func() time.Time { return sat }})
	if err := b.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if st := b.Calendar(domain.Stocks).At(sat); !st.Open || st.Known {
		t.Errorf("stocks before any session is stored: %+v, want open and unknown", st)
	}
	if st := b.Calendar(domain.Forex).At(sat); st.Open || !st.Known {
		t.Errorf("forex on Saturday: %+v", st)
	}
	if st := b.Calendar(domain.Crypto).At(sat); !st.Open {
		t.Errorf("crypto on Saturday: %+v", st)
	}
	syn := feeds.NewSynthetic(1, nil)
	s, err := syn.Schedule(ctx, domain.Stocks, sat.AddDate(0, 0, -30), sat.AddDate(0, 0, 30))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SaveSchedule(ctx, s, "synthetic", sat); err != nil {
		t.Fatal(err)
	}
	if err := b.Load(ctx); err != nil {
		t.Fatal(err)
	}
	st := b.Calendar(domain.Stocks).At(sat)
	if st.Open || !st.Known || !st.Session.Close.Equal(time.Date(2026, 11, 27, 18, 0, 0, 0, time.UTC)) ||
		!st.NextOpen.Equal(time.Date(2026, 11, 30, 14, 30, 0, 0, time.UTC)) {
		t.Errorf("stocks on Saturday: %+v, want closed since Friday's 13:00 New York close until Monday 09:30", st)
	}
}

type failing struct{}

func (failing) Schedule(context.Context, domain.Market, time.Time, time.Time) (domain.Schedule, bool, error) {
	return domain.Schedule{}, false, errors.New("database down")
}

// TestBookKeepsLastCalendarOnError: a failed reload keeps what was read.
func TestBookKeepsLastCalendarOnError(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	sat := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	s, _ := feeds.NewSynthetic(1, nil).Schedule(ctx, domain.Stocks, sat.AddDate(0, 0, -5), sat.AddDate(0, 0, 5))
	if err := db.SaveSchedule(ctx, s, "synthetic", sat); err != nil {
		t.Fatal(err)
	}
	var reader calendar.ScheduleReader = db
	b := calendar.New(calendar.Config{Store: switchable{&reader}, Now: func() time.Time { return sat }})
	if err := b.Load(ctx); err != nil {
		t.Fatal(err)
	}
	reader = failing{}
	if err := b.Load(ctx); err == nil {
		t.Fatal("a failed read is not reported")
	}
	if st := b.Calendar(domain.Stocks).At(sat); st.Open || !st.Known {
		t.Errorf("after a failed reload: %+v, want the calendar read before", st)
	}
}

type switchable struct{ r *calendar.ScheduleReader }

func (s switchable) Schedule(ctx context.Context, m domain.Market, first, last time.Time) (domain.Schedule, bool, error) {
	return (*s.r).Schedule(ctx, m, first, last)
}

// TestBookAskedWithoutAllocating: the api asks the calendar on every
// screener and candle request.
func TestBookAskedWithoutAllocating(t *testing.T) {
	db := storetest.New(t)
	ctx := context.Background()
	sat := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	b := calendar.New(calendar.Config{Store: db, Now: func() time.Time { return sat }})
	for _, loaded := range []bool{false, true} {
		if loaded {
			s, _ := feeds.NewSynthetic(1, nil).Schedule(ctx, domain.Stocks, sat.AddDate(0, 0, -5), sat.AddDate(0, 0, 5))
			if err := db.SaveSchedule(ctx, s, "synthetic", sat); err != nil {
				t.Fatal(err)
			}
			if err := b.Load(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, m := range domain.Markets {
			if n := testing.AllocsPerRun(100, func() { _ = b.Calendar(m).At(sat) }); n != 0 {
				t.Errorf("%s (sessions loaded: %v): %.0f allocations a question", m, loaded, n)
			}
		}
	}
}
