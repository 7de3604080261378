package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/invalidation"
)

// A tier downgrade to fewer concurrent streams closes the newest streams
// beyond the new cap, over every replica, with a closed 429 event; the
// oldest ones stay open, and the client is then at its new cap.
func TestTierDowngradeClosesTheNewestStreamsBeyondTheCap(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t, domain.Business) // 10 streams
	replicas := []*streamReplica{f.replica(t), f.replica(t)}
	var conns []*sseConn
	for i := range 4 { // oldest first, alternating replicas
		c, resp := openStream(t, replicas[i%2].srv.URL, f.key, "?market=crypto", nil)
		if c == nil {
			t.Fatalf("open %d: %d", i, resp.StatusCode)
		}
		select {
		case <-c.heartbeats:
		case <-time.After(10 * time.Second):
			t.Fatalf("stream %d: no heartbeat", i)
		}
		conns = append(conns, c)
	}

	if _, err := f.db.SetClientTier(context.Background(), f.clientID, domain.Starter, []domain.Market{domain.Crypto}); err != nil {
		t.Fatal(err)
	}
	f.publish(t, invalidation.ClientChanged(f.clientID))
	at := time.Now()
	for _, c := range conns[2:] {
		c.waitClosed(t, http.StatusTooManyRequests, at)
	}
	for i, c := range conns[:2] {
		drain(c)
		select {
		case <-c.heartbeats:
		case <-c.done:
			t.Fatalf("stream %d (among the 2 oldest) was closed", i)
		case <-time.After(10 * time.Second):
			t.Fatalf("stream %d: no heartbeat", i)
		}
	}
	// The starter cap (2) is full: one more is refused.
	if c, resp := openStream(t, replicas[0].srv.URL, f.key, "?market=crypto", nil); c != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a third stream after the downgrade: %v, want 429", resp.StatusCode)
	}
}

// drain drops the heartbeats already received.
func drain(c *sseConn) {
	for {
		select {
		case <-c.heartbeats:
		default:
			return
		}
	}
}
