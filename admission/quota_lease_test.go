package admission_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/marketscreener/market/admission"
)

// hammerAdmit hammers ledgers until refused and returns the used values
// of every admitted request, sorted.
func hammerAdmit(t *testing.T, ledgers []*admission.QuotaLedger, clientID string, quota *int64, workers int, stop func(admitted int64) bool) []int64 {
	t.Helper()
	used := hammer(t, len(ledgers), workers, stop, func(i int) (int64, bool, error) {
		return ledgers[i].Admit(context.Background(), clientID, quota, june)
	})
	sort.Slice(used, func(i, j int) bool { return used[i] < used[j] })
	return used
}

func waitUsed(t *testing.T, b *quotaBundle, client string, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := b.db1.UsedThisMonth(context.Background(), client, june)
		if err != nil {
			t.Fatal(err)
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored used = %d, want %d (unused lease slots not given back)", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A client that keeps one process busy gets leases: most requests are
// admitted from memory. Every admitted request still has its own count
// 1..n, and once the load stops the unused part of the last lease is
// given back, so the stored count is exactly what was admitted.
func TestQuotaLedgerLeaseSustainedLoad(t *testing.T) {
	t.Parallel()
	b := setupQuota(t)
	b.leaseFromLowRates()
	client := insertClient(t, b.db1)

	used := hammerAdmit(t, []*admission.QuotaLedger{b.l1}, client, nil, 16, sustained(600*time.Millisecond, func(admitted int64) bool {
		granted, given := b.l1.LeaseStats()
		return granted-given >= admitted*3/4
	}))
	// Each admitted request has its own count. They are 1..n unless a lease
	// was given back while the next was on its way: the later counts then
	// run ahead by what was given back (GET /usage may include leased
	// requests, README "Leases"); the stored count is exact once the load
	// stops (below).
	requireUnique(t, used)
	if granted, _ := b.l1.LeaseStats(); granted == 0 {
		t.Fatalf("no lease in %s of sustained load (%d requests)", sustainedMax, len(used))
	}
	waitUsed(t, b, client, int64(len(used)))
	// Leases are asked for ahead of need, so once the rate is measured
	// most requests are admitted from one.
	granted, given := b.l1.LeaseStats()
	if fromLeases := granted - given; fromLeases < int64(len(used))/2 {
		t.Errorf("only %d of %d requests were admitted from leases (%d leased, %d given back)", fromLeases, len(used), granted, given)
	}
	t.Logf("%d requests, %d slots leased, %d given back", len(used), granted, given)
}

// Close gives back at once what the leases did not use.
func TestQuotaLedgerCloseGivesBackLease(t *testing.T) {
	t.Parallel()
	b := setupQuota(t)
	b.leaseFromLowRates()
	client := insertClient(t, b.db1)

	used := hammerAdmit(t, []*admission.QuotaLedger{b.l1}, client, nil, 16, sustained(400*time.Millisecond, func(int64) bool {
		granted, _ := b.l1.LeaseStats()
		return granted > 0
	}))
	b.l1.Close()
	granted, given := b.l1.LeaseStats()
	if granted == 0 {
		t.Fatalf("no lease in %s of sustained load (%d requests)", sustainedMax, len(used))
	}
	got, err := b.db1.UsedThisMonth(context.Background(), client, june)
	if err != nil || got != int64(len(used)) {
		t.Fatalf("after Close stored used = %d, %v; want %d (given back %d of %d leased)", got, err, len(used), given, granted)
	}
}

// With leases on both processes, a quota is still exact: two processes
// hammering until refused admit exactly the quota between them and never
// more, and the stored count ends at the quota.
func TestQuotaLedgerLeaseExactAcrossProcesses(t *testing.T) {
	t.Parallel()
	b := setupQuota(t)
	b.leaseFromLowRates()
	client := insertClient(t, b.db1)
	const quota = 25_000

	used := hammerAdmit(t, []*admission.QuotaLedger{b.l1, b.l2}, client, ptr(int64(quota)), 8, nil)
	if len(used) != quota {
		t.Fatalf("admitted %d, want exactly %d", len(used), quota)
	}
	g1, _ := b.l1.LeaseStats()
	g2, _ := b.l2.LeaseStats()
	if g1+g2 == 0 {
		t.Fatalf("no lease granted: the test did not exercise leases")
	}
	waitUsed(t, b, client, quota)
	t.Logf("leased %d + %d slots", g1, g2)
}

// A short burst never gets a lease: its count stays exact at every moment,
// as before leases existed (an unlimited client's burst is counted as it
// is admitted, so GET /usage on another process sees all of it).
func TestQuotaLedgerBurstGetsNoLease(t *testing.T) {
	t.Parallel()
	b := setupQuota(t)
	client := insertClient(t, b.db1)
	used := admitConcurrently(t, []*admission.QuotaLedger{b.l1, b.l2}, client, nil, 300, june)
	requireSequence(t, used, 300)
	if g, _ := b.l1.LeaseStats(); g != 0 {
		t.Errorf("a 300-request burst got %d leased slots", g)
	}
	got, err := b.db2.UsedThisMonth(context.Background(), client, june)
	if err != nil || got != 300 {
		t.Errorf("stored used = %d, %v; want 300 right after the burst", got, err)
	}
}

func requireUnique(t *testing.T, used []int64) {
	t.Helper()
	if len(used) == 0 || used[0] != 1 {
		t.Fatalf("first admitted request got used=%v, want 1", used[:min(len(used), 1)])
	}
	for i := 1; i < len(used); i++ {
		if used[i] == used[i-1] {
			t.Fatalf("two admitted requests got used=%d", used[i])
		}
	}
}

// leaseFromLowRates lets both ledgers lease from ≈ 320 requests/s instead
// of ≈ 2 500, so that the lease tests exercise leases on a loaded machine.
func (b *quotaBundle) leaseFromLowRates() {
	b.l1.LeaseMin, b.l2.LeaseMin = 32, 32
}
