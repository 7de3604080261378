package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
)

// The open-candle rule's slots: the timeframe split from the candle's open
// into as many slots as a sixteenth of it, rounded up to a whole minute and
// at least two minutes, fits whole, less until none starts on a 15-minute
// close.
func TestRescoreSlots(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 17, 30, 0, time.UTC)
	for _, c := range []struct {
		tf         domain.Timeframe
		every      time.Duration
		start, end string
	}{
		{domain.TF15m, 2 * time.Minute, "10:17:08", "10:19:17"}, // 7 slots of 2m8.57s from 10:15
		{domain.TF1h, 4 * time.Minute, "10:16:00", "10:20:00"},
		{domain.TF4h, 15 * time.Minute, "10:08:00", "10:24:00"}, // 15 slots of 16 min from 08:00
		{domain.TF1d, 90 * time.Minute, "09:13:50", "11:04:36"}, // 13 slots of 1h50m46.15s from 00:00
	} {
		if got := store.RescoreEvery(c.tf); got != c.every {
			t.Errorf("RescoreEvery(%s) = %s, want %s", c.tf, got, c.every)
		}
		start, end := store.RescoreSlot(now, c.tf)
		if got, want := start.Format(time.TimeOnly)+"–"+end.Format(time.TimeOnly), c.start+"–"+c.end; got != want {
			t.Errorf("slot of %s at %s = %s, want %s", c.tf, now.Format(time.TimeOnly), got, want)
		}
		// No slot but the first starts on a scalp close: a style's
		// open-candle rescoring of the universe never lands on the
		// moment scalp's closed candles are scored.
		day := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
		for at := day; at.Before(day.Add(24 * time.Hour)); at = at.Add(time.Minute) {
			start, end := store.RescoreSlot(at, c.tf)
			if end.Sub(start) < c.every {
				t.Fatalf("%s slot %s–%s is shorter than %s", c.tf, start, end, c.every)
			}
			if !start.Equal(c.tf.Truncate(start)) && start.Equal(start.Truncate(15*time.Minute)) {
				t.Fatalf("%s slot starts at %s, a 15-minute close", c.tf, start.Format(time.TimeOnly))
			}
		}
	}

	// Scalp: the candle's first slot holds its open and the next minute
	// (a new candle scored at once is not rescored a minute later); seven
	// slots tile the candle exactly, the last ending at the next open.
	open := time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)
	var starts []string
	prevEnd := open
	for at := open; at.Before(open.Add(15 * time.Minute)); at = at.Add(time.Second) {
		start, end := store.RescoreSlot(at, domain.TF15m)
		if at.Before(start) || !at.Before(end) {
			t.Fatalf("slot of %s = %s–%s does not hold it", at.Format(time.TimeOnly), start.Format(time.TimeOnly), end.Format(time.TimeOnly))
		}
		if start.Equal(prevEnd) || start.Equal(open) && len(starts) == 0 {
			starts = append(starts, start.Format("15:04:05.000"))
			prevEnd = end
		}
		if end.Sub(start) < 2*time.Minute {
			t.Fatalf("slot %s–%s is shorter than the rule's 2 minutes", start, end)
		}
	}
	if want := []string{"10:15:00.000", "10:17:08.571", "10:19:17.142", "10:21:25.714", "10:23:34.285", "10:25:42.857", "10:27:51.428"}; !slices.Equal(starts, want) {
		t.Errorf("scalp slots start %v, want %v", starts, want)
	}
	if _, end := store.RescoreSlot(open.Add(15*time.Minute-time.Nanosecond), domain.TF15m); !end.Equal(open.Add(15 * time.Minute)) {
		t.Errorf("the last scalp slot ends %s, want the next open", end)
	}
}
