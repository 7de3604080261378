package admission_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// quotaBundle is two api processes' view of one database: two pools on
// the same schema, each with a ledger of its own.
type quotaBundle struct {
	db1, db2 *store.DB
	l1, l2   *admission.QuotaLedger
}

func setupQuota(tb testing.TB) *quotaBundle {
	tb.Helper()
	ctx := context.Background()
	schema := storetest.CreateSchema(tb)
	open := func() *store.DB {
		db, err := store.Open(ctx, storetest.DatabaseURL(), store.Options{Schema: schema, MaxConns: 8})
		if err != nil {
			tb.Fatalf("open: %v", err)
		}
		tb.Cleanup(db.Close)
		return db
	}
	b := &quotaBundle{db1: open(), db2: open()}
	if _, err := b.db1.Migrate(ctx); err != nil {
		tb.Fatalf("migrate: %v", err)
	}
	b.l1 = admission.NewQuotaLedger(b.db1, admission.Options{})
	b.l2 = admission.NewQuotaLedger(b.db2, admission.Options{})
	tb.Cleanup(b.l1.Close)
	tb.Cleanup(b.l2.Close)
	return b
}

func insertClient(tb testing.TB, db *store.DB) string {
	tb.Helper()
	var id string
	err := db.Pool.QueryRow(context.Background(),
		`INSERT INTO clients (org_name, tier, markets) VALUES ('Acme', 'business', ARRAY['crypto']) RETURNING id`).Scan(&id)
	if err != nil {
		tb.Fatalf("insert client: %v", err)
	}
	return id
}

func ptr[T any](v T) *T { return &v }

var june = time.Date(2026, time.June, 14, 12, 0, 0, 0, time.UTC)

// admitConcurrently sends n requests at once (in now's month), alternating
// between the ledgers, and returns the used values of the admitted ones, sorted.
func admitConcurrently(t *testing.T, ledgers []*admission.QuotaLedger, clientID string, quota *int64, n int, now time.Time) []int64 {
	t.Helper()
	var (
		mu   sync.Mutex
		used []int64
		wg   sync.WaitGroup
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			u, ok, err := ledgers[i%len(ledgers)].Admit(context.Background(), clientID, quota, now)
			if err != nil {
				t.Errorf("admit: %v", err)
				return
			}
			if ok {
				mu.Lock()
				used = append(used, u)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	sort.Slice(used, func(i, j int) bool { return used[i] < used[j] })
	return used
}

// requireSequence checks that the admitted requests got the counts 1..n,
// each exactly once: no request was admitted on a stale count.
func requireSequence(t *testing.T, used []int64, n int) {
	t.Helper()
	if len(used) != n {
		t.Fatalf("admitted %d, want %d", len(used), n)
	}
	for i, u := range used {
		if u != int64(i+1) {
			t.Fatalf("admitted request %d got used=%d, want %d (used values around it: %v)", i, u, i+1, used[max(i-3, 0):min(i+4, len(used))])
		}
	}
}

func TestQuotaLedgerExactAcrossProcesses(t *testing.T) {
	t.Parallel()
	b := setupQuota(t)
	client := insertClient(t, b.db1)

	used := admitConcurrently(t, []*admission.QuotaLedger{b.l1, b.l2}, client, ptr(int64(50)), 200, june)
	requireSequence(t, used, 50)

	got, err := b.db2.UsedThisMonth(context.Background(), client, june)
	if err != nil {
		t.Fatal(err)
	}
	if got != 50 {
		t.Errorf("stored used = %d, want 50", got)
	}
	u, ok, err := b.l1.Admit(context.Background(), client, ptr(int64(50)), june)
	if err != nil || ok || u != 50 {
		t.Errorf("Admit after exhaustion = %d, %v, %v; want 50, false, nil", u, ok, err)
	}
}

func TestQuotaLedgerUnlimitedCountsEveryRequest(t *testing.T) {
	t.Parallel()
	b := setupQuota(t)
	client := insertClient(t, b.db1)

	used := admitConcurrently(t, []*admission.QuotaLedger{b.l1, b.l2}, client, nil, 300, june)
	requireSequence(t, used, 300)
	got, err := b.db1.UsedThisMonth(context.Background(), client, june)
	if err != nil || got != 300 {
		t.Errorf("UsedThisMonth = %d, %v; want 300", got, err)
	}
}

func TestQuotaLedgerMonthRollover(t *testing.T) {
	t.Parallel()
	b := setupQuota(t)
	client := insertClient(t, b.db1)
	ctx := context.Background()
	quota := ptr(int64(3))
	lastInstant := time.Date(2026, time.June, 30, 23, 59, 59, 999999999, time.UTC)
	for range 3 {
		if _, ok, err := b.l1.Admit(ctx, client, quota, lastInstant); err != nil || !ok {
			t.Fatalf("Admit in June = %v, %v", ok, err)
		}
	}
	if _, ok, _ := b.l1.Admit(ctx, client, quota, lastInstant); ok {
		t.Fatal("fourth request in June admitted")
	}
	// The first instant of July, given in another zone: the month is UTC.
	july := time.Date(2026, time.July, 1, 2, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	u, ok, err := b.l2.Admit(ctx, client, quota, july)
	if err != nil || !ok || u != 1 {
		t.Errorf("first July Admit = %d, %v, %v; want 1, true, nil", u, ok, err)
	}
	if got, _ := b.db1.UsedThisMonth(ctx, client, lastInstant); got != 3 {
		t.Errorf("June used = %d, want 3", got)
	}
}

func TestQuotaLedgerRaisedQuotaAdmitsAgain(t *testing.T) {
	t.Parallel()
	b := setupQuota(t)
	client := insertClient(t, b.db1)
	ctx := context.Background()
	for range 2 {
		if _, ok, err := b.l1.Admit(ctx, client, ptr(int64(2)), june); err != nil || !ok {
			t.Fatalf("Admit = %v, %v", ok, err)
		}
	}
	if u, ok, _ := b.l1.Admit(ctx, client, ptr(int64(2)), june); ok || u != 2 {
		t.Fatalf("Admit over quota = %d, %v; want 2, false", u, ok)
	}
	if u, ok, err := b.l1.Admit(ctx, client, ptr(int64(5)), june); err != nil || !ok || u != 3 {
		t.Errorf("Admit after upgrade = %d, %v, %v; want 3, true, nil", u, ok, err)
	}
	// A downgrade below the count refuses without lowering the count.
	if u, ok, _ := b.l1.Admit(ctx, client, ptr(int64(1)), june); ok || u != 3 {
		t.Errorf("Admit after downgrade = %d, %v; want 3, false", u, ok)
	}
}

func TestQuotaLedgerMixedQuotasInOneBatch(t *testing.T) {
	t.Parallel()
	b := setupQuota(t)
	client := insertClient(t, b.db1)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted = map[int64]int{}
	)
	start := make(chan struct{})
	for i := range 100 {
		quota := int64(10)
		if i%2 == 1 {
			quota = 30
		}
		wg.Go(func() {
			<-start
			_, ok, err := b.l1.Admit(context.Background(), client, &quota, june)
			if err != nil {
				t.Errorf("admit: %v", err)
			}
			if ok {
				mu.Lock()
				admitted[quota]++
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	used, _ := b.db1.UsedThisMonth(context.Background(), client, june)
	if total := admitted[10] + admitted[30]; int64(total) != used || used != 30 {
		t.Errorf("admitted %v (total %d), stored %d; want 30 in all", admitted, total, used)
	}
	if admitted[10] > 10 {
		t.Errorf("%d requests admitted with quota 10", admitted[10])
	}
}

func TestQuotaLedgerCancelledRequest(t *testing.T) {
	t.Parallel()
	b := setupQuota(t)
	client := insertClient(t, b.db1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok, err := b.l1.Admit(ctx, client, ptr(int64(5)), june); err == nil || ok {
		t.Errorf("Admit with a cancelled context = %v, %v; want an error", ok, err)
	}
	if got, _ := b.db1.UsedThisMonth(context.Background(), client, june); got != 0 {
		t.Errorf("used = %d after a request that never reached the ledger", got)
	}
}

func TestQuotaLedgerClosed(t *testing.T) {
	t.Parallel()
	b := setupQuota(t)
	client := insertClient(t, b.db1)
	b.l1.Close()
	if _, _, err := b.l1.Admit(context.Background(), client, nil, june); err == nil {
		t.Error("Admit after Close succeeded")
	}
}

func TestUsedThisMonthBeforeFirstRequest(t *testing.T) {
	t.Parallel()
	b := setupQuota(t)
	client := insertClient(t, b.db1)
	if got, err := b.db1.UsedThisMonth(context.Background(), client, june); err != nil || got != 0 {
		t.Errorf("UsedThisMonth = %d, %v; want 0, nil", got, err)
	}
}

func BenchmarkQuotaLedgerAdmitParallel(b *testing.B) {
	bundle := setupQuota(b)
	client := insertClient(b, bundle.db1)
	quota := ptr(int64(1 << 40))
	ctx := context.Background()
	b.SetParallelism(32) // 64 goroutines on 2 cores: the api's connection count
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok, err := bundle.l1.Admit(ctx, client, quota, june); err != nil || !ok {
				b.Errorf("Admit = %v, %v", ok, err)
				return
			}
		}
	})
}

// BenchmarkQuotaLedgerAdmit is one request at a time: the latency of a
// batch of one, what a request pays at low load.
func BenchmarkQuotaLedgerAdmit(b *testing.B) {
	bundle := setupQuota(b)
	client := insertClient(b, bundle.db1)
	quota := ptr(int64(1 << 40))
	ctx := context.Background()
	for b.Loop() {
		if _, ok, err := bundle.l1.Admit(ctx, client, quota, june); err != nil || !ok {
			b.Fatalf("Admit = %v, %v", ok, err)
		}
	}
}

// The first batch of a month creates the month's row. Both processes race
// to do so, month after month: exactly the quota is admitted, numbered
// 1..quota, and a first batch larger than the quota (or a quota of 0)
// admits only what fits.
func TestQuotaLedgerFirstBatchOfMonthRace(t *testing.T) {
	t.Parallel()
	b := setupQuota(t)
	client := insertClient(t, b.db1)
	ctx := context.Background()
	for m := range 6 {
		now := time.Date(2027, time.Month(1+m), 3, 0, 0, 0, 0, time.UTC)
		const quota, n = 7, 40
		used := admitConcurrently(t, []*admission.QuotaLedger{b.l1, b.l2}, client, ptr(int64(quota)), n, now)
		requireSequence(t, used, quota)
		if got, err := b.db1.UsedThisMonth(ctx, client, now); err != nil || got != quota {
			t.Errorf("month %d: UsedThisMonth = %d, %v; want %d", m+1, got, err, quota)
		}
	}
	// A quota of 0 on a month's first request: refused, nothing counted.
	dec := time.Date(2027, time.December, 1, 0, 0, 0, 0, time.UTC)
	if u, ok, err := b.l2.Admit(ctx, client, ptr(int64(0)), dec); err != nil || ok || u != 0 {
		t.Errorf("quota 0: %d, %v, %v; want 0, false, nil", u, ok, err)
	}
	if u, ok, err := b.l1.Admit(ctx, client, nil, dec); err != nil || !ok || u != 1 {
		t.Errorf("unlimited after a refusal: %d, %v, %v; want 1, true, nil", u, ok, err)
	}
}
