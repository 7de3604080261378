package push

import (
	"context"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

// TestAlpacaRepairStartsWhereTheGapBegan: the repair after a reconnect
// reads each series from the newest candle it had delivered when the
// connection dropped, not from one the new connection delivered before
// the repair started (that would skip every candle in between).
func TestAlpacaRepairStartsWhereTheGapBegan(t *testing.T) {
	t.Parallel()
	nasdaq := domain.Combination{Market: domain.Stocks, Exchange: "nasdaq", Instrument: "stock"}
	key := seriesOf{nasdaq, Series{Symbol: "AAPL", Timeframe: domain.TF1m}}
	atDrop := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	var gaps []Gap
	cfg := Config{RepairBatch: func(_ context.Context, gs []Gap) error { gaps = append(gaps, gs...); return nil }}.withDefaults()
	r := &alpacaRun{cfg: cfg, lastOpen: map[seriesOf]time.Time{}}
	r.dropped() // a connection that delivered nothing
	r.lastOpen[key] = atDrop

	r.dropped()
	r.mu.Lock()
	r.lastOpen[key] = atDrop.Add(3 * time.Minute) // the new connection's first bar
	r.mu.Unlock()
	r.dropped() // a second drop before the repair keeps the first gap's start
	r.repair(context.Background())
	if len(gaps) != 1 || !gaps[0].Since.Equal(atDrop) {
		t.Fatalf("gaps %+v, want AAPL 1m from %s", gaps, atDrop)
	}
	gaps = nil
	r.repair(context.Background())
	if len(gaps) != 0 {
		t.Errorf("a second repair without a drop: gaps %+v", gaps)
	}
}
