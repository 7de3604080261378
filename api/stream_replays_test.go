package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
)

// cryptoReplaysBlock is a log whose crypto replays never end by themselves
// (a slow query holding its replay token); other replays read the log.
type cryptoReplaysBlock struct {
	api.StreamData
	running atomic.Int32 // crypto replays under way
}

func (b *cryptoReplaysBlock) ReplayStreamEvents(ctx context.Context, f store.StreamFilter, after, upTo domain.StreamPos, limit int) ([]domain.StreamEvent, error) {
	if slices.Contains(f.Markets, domain.Crypto) {
		b.running.Add(1)
		defer b.running.Add(-1)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return b.StreamData.ReplayStreamEvents(ctx, f, after, upTo, limit)
}

// One client resuming more streams than its share of the replica's replay
// tokens (half of them) cannot starve another client: with 2 tokens, a
// client's two stuck replays hold one, and another client's resume still
// replays at once.
func TestOneClientCannotTakeEveryReplayToken(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t, domain.Business)
	data := &cryptoReplaysBlock{StreamData: f.db}
	r := f.replicaWith(t, replicaOptions{data: data, replays: 2})
	other := &domain.Client{OrgName: "Other", Tier: domain.Business, Markets: domain.Markets}
	if err := f.db.CreateClient(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	otherKey, _, err := f.db.IssueKey(context.Background(), other.ID)
	if err != nil {
		t.Fatal(err)
	}
	f.verdictEvent(t, domain.Crypto, "BTC_USDT")
	first := f.lastStreamID(t)
	f.verdictEvent(t, domain.Forex, "EUR_USD")
	f.waitReadable(t, f.lastStreamID(t))
	resume := http.Header{"Last-Event-Id": {fmt.Sprint(first)}}

	// The first client resumes two crypto streams: both replays get stuck.
	for range 2 {
		if c, resp := openStream(t, r.srv.URL, f.key, "?market=crypto", resume); c == nil {
			t.Fatalf("open: %d", resp.StatusCode)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for data.running.Load() < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the first client's replay did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the second one takes a token too, if it can
	if n := data.running.Load(); n != 1 {
		t.Fatalf("%d of the first client's replays run at once, want 1 (its share of 2 tokens)", n)
	}

	// The other client's resume replays its forex event at once.
	c, resp := openStream(t, r.srv.URL, otherKey, "?market=forex", resume)
	if c == nil {
		t.Fatalf("open: %d", resp.StatusCode)
	}
	if v := verdictOf(t, c.next(t)); v.Market != domain.Forex || v.Symbol != "EUR_USD" {
		t.Fatalf("replayed %+v, want the forex event", v)
	}
}
