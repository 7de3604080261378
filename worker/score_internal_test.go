package worker

import (
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

// The open-candle rule's slots: a sixteenth of the timeframe rounded up to
// a whole minute, at least two minutes, aligned to the clock.
func TestRescoreSlots(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 17, 30, 0, time.UTC)
	for _, c := range []struct {
		tf         domain.Timeframe
		every      time.Duration
		start, end string
	}{
		{domain.TF15m, 2 * time.Minute, "10:16:00", "10:18:00"},
		{domain.TF1h, 4 * time.Minute, "10:16:00", "10:20:00"},
		{domain.TF4h, 15 * time.Minute, "10:15:00", "10:30:00"},
		{domain.TF1d, 90 * time.Minute, "09:00:00", "10:30:00"},
	} {
		if got := rescoreEvery(c.tf); got != c.every {
			t.Errorf("rescoreEvery(%s) = %s, want %s", c.tf, got, c.every)
		}
		start, end := rescoreSlot(now, c.tf)
		if got, want := start.Format(time.TimeOnly)+"–"+end.Format(time.TimeOnly), c.start+"–"+c.end; got != want {
			t.Errorf("slot of %s at %s = %s, want %s", c.tf, now.Format(time.TimeOnly), got, want)
		}
	}
}
