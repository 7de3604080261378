package admission_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/faultproxy"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// While the quota ledger cannot commit (its Postgres connections cut and
// refused, as when the primary dies), metered requests are admitted
// provisionally against the last count plus what was admitted since, up
// to the quota (then 429 quota, as the ledger would), and counted in the
// ledger, exactly, as soon as it takes writes again; then the ledger alone
// decides again. One log line each way.
func TestGateAdmitsProvisionallyWhileTheLedgerIsAway(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newGateBundle(t)
	proxy := faultproxy.New(t, faultproxy.PostgresTarget())
	var schema string
	if err := b.db.Pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	ledgerDB, err := store.Open(ctx, faultproxy.Through(storetest.DatabaseURL(), faultproxy.PostgresTarget(), proxy.Addr()),
		store.Options{Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ledgerDB.Close)
	b.usage = ledgerDB
	var logs redistest.LogBuffer
	b.start(t, admission.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	key, c := b.newKey(t, func(c *domain.Client) { c.QuotaOverride = ptr(int64(40)) })
	month := domain.Month(time.Now())
	counted := func() int64 {
		t.Helper()
		_, n, err := b.db.AddUsage(ctx, c.ID, month, nil, 0) // on the direct pool: the ledger's row
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := 1; i <= 10; i++ {
		if out := admit(t, b.gate, key, "10.0.0.1:1"); out.Status != http.StatusOK || out.Used != int64(i) {
			t.Fatalf("request %d with the ledger up: %d, used %d", i, out.Status, out.Used)
		}
	}

	proxy.Set("refuse")
	var used []int64
	refused := 0
	for range 35 {
		out := admit(t, b.gate, key, "10.0.0.1:1")
		switch out.Status {
		case http.StatusOK:
			used = append(used, out.Used)
		case http.StatusTooManyRequests:
			if out.Detail != admission.QuotaExceededDetail {
				t.Fatalf("refused while the ledger is away: %q", out.Detail)
			}
			refused++
		default:
			t.Fatalf("while the ledger is away: %d %q", out.Status, out.Detail)
		}
	}
	if len(used) != 30 || used[0] != 11 || used[29] != 40 || refused != 5 {
		t.Fatalf("while the ledger is away: admitted %d (used %v), refused %d; want 30 (11..40) and 5 over the quota of 40", len(used), used, refused)
	}
	if n := counted(); n != 10 {
		t.Fatalf("the ledger counted %d while it was away, want the 10 from before", n)
	}

	proxy.Set("pass")
	eventuallyTrue(t, "the provisional requests counted", func() bool { return counted() == 40 })
	eventuallyTrue(t, "the outage over", func() bool { return strings.Contains(logs.String(), "commits again") })
	// The ledger decides again: the quota is used up.
	if out := admit(t, b.gate, key, "10.0.0.1:1"); out.Status != http.StatusTooManyRequests || out.Used != 40 || counted() != 40 {
		t.Fatalf("after the outage: %d, used %d, counted %d; want 429 at 40", out.Status, out.Used, counted())
	}
	if got := strings.Count(logs.String(), "cannot commit"); got != 1 {
		t.Errorf("%d log lines for the outage's start, want 1:\n%s", got, logs.String())
	}
}
