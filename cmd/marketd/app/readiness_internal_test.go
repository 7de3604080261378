package app

import (
	"context"
	"testing"

	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/faultproxy"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// With a read replica the primary is not required for an api's readiness:
// while it fails over (its connections refused) /readyz stays ready, the
// replica answering the reads; when neither the replica nor the primary
// answers, the api is not ready.
func TestReadyWhileThePrimaryFailsOverBehindAReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	target := faultproxy.PostgresTarget()
	primaryProxy, replicaProxy := faultproxy.New(t, target), faultproxy.New(t, target)
	open := func(p *faultproxy.Proxy) *store.DB {
		db, err := store.Open(ctx, faultproxy.Through(storetest.DatabaseURL(), target, p.Addr()), store.Options{MaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		return db
	}
	primary, replica := open(primaryProxy), open(replicaProxy)
	router := store.NewReadRouter(primary, replica, 0)
	checks := readsCheck([]api.Check{{Name: "postgres", Required: true, Probe: primary.Ping}}, router)
	r := api.NewReadiness(checks...)
	r.ProbeOnce(ctx)
	if st, states := r.Status(); st != "ready" {
		t.Fatalf("with both answering: %s %v", st, states)
	}

	primaryProxy.Set("refuse")
	router.Probe(ctx) // the replica answers (a server not in recovery: a promoted one)
	r.ProbeOnce(ctx)
	if st, states := r.Status(); !r.Ready() || st != "degraded" || states["postgres_reads"] != "ok" {
		t.Fatalf("while the primary fails over and the replica answers: %s %v, want ready and degraded", st, states)
	}

	replicaProxy.Set("refuse")
	router.Probe(ctx)
	r.ProbeOnce(ctx)
	if st, states := r.Status(); r.Ready() || st != "not_ready" {
		t.Fatalf("with neither the replica nor the primary answering: %s %v, want not ready", st, states)
	}
}
