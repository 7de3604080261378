package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store/storetest"
)

func date(s string) time.Time {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return t
}

// nySession is a session of date from open to close, New York wall clock.
func nySession(d, open, close string) domain.Session {
	at := func(hm string) time.Time {
		t, _ := time.ParseInLocation("2006-01-02 15:04", d+" "+hm, domain.NewYork())
		return t.UTC()
	}
	return domain.Session{Day: date(d), Open: at(open), Close: at(close)}
}

// TestScheduleRoundTrip: sessions are stored and read back by trading
// day; a refresh replaces the days it covers (a closure announced since
// removes a session) and widens the covered range; a window is clipped to
// what is covered.
func TestScheduleRoundTrip(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	at := time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)
	if _, ok, err := db.Schedule(ctx, domain.Stocks, date("2026-11-01"), date("2026-12-31")); err != nil || ok {
		t.Fatalf("nothing stored: ok=%v err=%v", ok, err)
	}
	first := domain.Schedule{Market: domain.Stocks, First: date("2026-11-23"), Last: date("2026-11-30"), Sessions: []domain.Session{
		nySession("2026-11-23", "09:30", "16:00"), nySession("2026-11-24", "09:30", "16:00"),
		nySession("2026-11-25", "09:30", "16:00"), nySession("2026-11-27", "09:30", "13:00"),
		nySession("2026-11-30", "09:30", "16:00"),
	}}
	if err := db.SaveSchedule(ctx, first, "alpaca", at); err != nil {
		t.Fatal(err)
	}
	got, ok, err := db.Schedule(ctx, domain.Stocks, date("2026-11-01"), date("2026-12-31"))
	if err != nil || !ok {
		t.Fatalf("read: ok=%v err=%v", ok, err)
	}
	if diff := cmp.Diff(first, got); diff != "" {
		t.Fatalf("read back (-stored +read):\n%s", diff)
	}
	// A refresh from the 25th: the 30th is now a closure, December follows.
	second := domain.Schedule{Market: domain.Stocks, First: date("2026-11-25"), Last: date("2026-12-02"), Sessions: []domain.Session{
		nySession("2026-11-25", "09:30", "16:00"), nySession("2026-11-27", "09:30", "13:00"),
		nySession("2026-12-01", "09:30", "16:00"), nySession("2026-12-02", "09:30", "16:00"),
	}}
	if err := db.SaveSchedule(ctx, second, "alpaca", at.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, _, err = db.Schedule(ctx, domain.Stocks, date("2026-11-24"), date("2027-01-31"))
	if err != nil {
		t.Fatal(err)
	}
	want := domain.Schedule{Market: domain.Stocks, First: date("2026-11-24"), Last: date("2026-12-02"),
		Sessions: append([]domain.Session{nySession("2026-11-24", "09:30", "16:00")}, second.Sessions...)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("after a refresh (-want +got):\n%s", diff)
	}
	// A range apart from the stored one replaces it.
	apart := domain.Schedule{Market: domain.Stocks, First: date("2027-03-01"), Last: date("2027-03-02"), Sessions: []domain.Session{
		nySession("2027-03-01", "09:30", "16:00"), nySession("2027-03-02", "09:30", "16:00"),
	}}
	if err := db.SaveSchedule(ctx, apart, "synthetic", at); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := db.Schedule(ctx, domain.Stocks, date("2026-11-01"), date("2026-12-31")); ok {
		t.Error("the earlier range is still covered after a range apart from it replaced it")
	}
	// Another market is apart.
	if _, ok, _ := db.Schedule(ctx, domain.Forex, date("2026-11-01"), date("2027-12-31")); ok {
		t.Error("forex has a stored calendar")
	}
	bad := first
	bad.Sessions = []domain.Session{bad.Sessions[1], bad.Sessions[0]}
	if err := db.SaveSchedule(ctx, bad, "alpaca", at); domain.ErrorCode(err) != domain.EINVALID {
		t.Errorf("sessions out of order: %v, want EINVALID", err)
	}
}
