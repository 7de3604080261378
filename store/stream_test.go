package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// A plain "id > last seen" reader skips id 1 for ever when id 2 commits
// first and is read before id 1 commits. The stream's readers take only
// rows of ended transactions, in (transaction, id) order: an open writer
// holds the stream back (it never skips it), and writers never wait for
// each other.
func TestStreamEventsWaitForALateCommitInsteadOfSkippingIt(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	insert := `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
		VALUES ('crypto', $1, 'neutral', 'growth', 30, clock_timestamp())`
	early, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Rollback(ctx) //nolint:errcheck
	if _, err := early.Exec(ctx, insert, "EARLY"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, insert, "LATER"); err != nil { // commits at once: no waiting
		t.Fatal(err)
	}
	if events, err := db.StreamEvents(ctx, domain.StreamPos{}, 10); err != nil || len(events) != 0 {
		t.Fatalf("while an earlier writer is open the stream gave %+v (%v), want nothing yet", events, err)
	}
	if p, err := db.LastStreamPos(ctx); err != nil || p != (domain.StreamPos{}) {
		t.Fatalf("last position %+v (%v) while an earlier writer is open", p, err)
	}
	// LATER is committed but held back: the hub is told so, and reads
	// again until it is readable.
	if events, held, err := db.StreamEventsHeld(ctx, domain.StreamPos{}, 10); err != nil || len(events) != 0 || !held {
		t.Fatalf("while an earlier writer is open: %+v held %v (%v), want nothing, held", events, held, err)
	}
	if err := early.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Other tests' transactions, anywhere in the cluster, may hold the
	// stream back a moment longer.
	events := eventually(t, db, 2)
	if events[0].Verdict.Symbol != "EARLY" || events[1].Verdict.Symbol != "LATER" || !events[1].Pos.After(events[0].Pos) {
		t.Fatalf("order: %+v then %+v", events[0].Verdict, events[1].Verdict)
	}
	if rest, err := db.StreamEvents(ctx, events[1].Pos, 10); err != nil || len(rest) != 0 {
		t.Fatalf("after the last: %+v (%v)", rest, err)
	}
	if got, held, err := db.StreamEventsHeld(ctx, domain.StreamPos{}, 10); err != nil || held || len(got) != 2 || got[0].Pos != events[0].Pos || got[1].Pos != events[1].Pos ||
		got[1].Verdict == nil || got[1].Verdict.Symbol != "LATER" {
		t.Fatalf("with the flag: %+v held %v (%v), want %+v, not held", got, held, err, events)
	}
	if rest, held, err := db.StreamEventsHeld(ctx, events[1].Pos, 10); err != nil || held || len(rest) != 0 {
		t.Fatalf("with the flag, after the last: %+v held %v (%v)", rest, held, err)
	}
	if p, ok, err := db.StreamPosOf(ctx, events[1].ID); err != nil || !ok || p != events[1].Pos {
		t.Fatalf("position of id %d: %+v %v %v", events[1].ID, p, ok, err)
	}
	if _, ok, err := db.StreamPosOf(ctx, 1<<40); err != nil || ok {
		t.Fatalf("an id never given: %v %v", ok, err)
	}
}

func TestReplayKeepsEveryVerdictAndTheNewestScreenerPerCombination(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	spot := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	perp := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "perpetual"}
	now := time.Now().UTC()
	put := func(c domain.Combination) {
		if err := db.ReplaceTickers(ctx, c, []domain.Ticker{{Symbol: "BTC_USDT", Price: 1, Volume: 1, UpdatedAt: now}}); err != nil {
			t.Fatal(err)
		}
	}
	put(spot)
	put(perp)
	if _, err := db.Pool.Exec(ctx, `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
		VALUES ('crypto', 'A', 'neutral', 'growth', 30, now()), ('forex', 'B', 'neutral', 'decline', -30, now())`); err != nil {
		t.Fatal(err)
	}
	put(spot)
	all := eventually(t, db, 5)
	last, err := db.LastStreamPos(ctx)
	if err != nil || all[4].Pos.After(last) {
		t.Fatalf("last position %+v (%v), the log has %+v", last, err, all[4].Pos)
	}
	last = all[4].Pos
	f := store.StreamFilter{Markets: []domain.Market{domain.Crypto}, Kinds: domain.StreamEventKinds}
	got, err := db.ReplayStreamEvents(ctx, f, domain.StreamPos{}, last, 100)
	if err != nil {
		t.Fatal(err)
	}
	// perp's only refresh, the crypto verdict, spot's newest refresh.
	if len(got) != 3 || got[0].Instrument != "perpetual" || got[1].Verdict == nil || got[1].Verdict.Symbol != "A" ||
		got[2].Instrument != "spot" || got[2].Pos != last {
		t.Fatalf("replay %+v", got)
	}
	// Paged: the same answer a page at a time.
	var paged []int64
	for after := (domain.StreamPos{}); ; {
		page, err := db.ReplayStreamEvents(ctx, f, after, last, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page[0].ID)
		after = page[0].Pos
	}
	if len(paged) != 3 || paged[0] != got[0].ID || paged[2] != got[2].ID {
		t.Fatalf("paged replay %v, want %v", paged, got)
	}
}

// A sandbox push fans out to the pushing client's subscriptions only, and
// its deliveries say it is a sandbox event.
func TestSandboxVerdictEventFansOutToItsClientOnly(t *testing.T) {
	t.Parallel()
	db, box, c := hookFixture(t)
	ctx := context.Background()
	other := newClient(t, db, nil)
	mine, _, err := db.CreateWebhook(ctx, box, c.ID, "https://hooks.example.com/mine", nil)
	if err != nil {
		t.Fatal(err)
	}
	theirs, _, err := db.CreateWebhook(ctx, box, other.ID, "https://hooks.example.com/theirs", nil)
	if err != nil {
		t.Fatal(err)
	}
	push := store.SandboxPusher{Live: db, Sandbox: storetest.New(t)}
	v, err := push.InsertSandboxVerdictEvent(ctx, c.ID, domain.Crypto, "BTC_USDT", "neutral", "growth", 35)
	if err != nil || v.EventID == 0 {
		t.Fatalf("push: %+v %v", v, err)
	}
	real := verdictEvent(t, db, "ETH_USDT")
	if n, err := db.FanOut(ctx, 100); err != nil || n != 2 {
		t.Fatalf("FanOut = %d, %v", n, err)
	}
	got := map[string][]int64{}
	sandbox := map[int64]bool{}
	for range 3 {
		ds, err := db.ClaimDeliveries(ctx, box, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			got[d.WebhookID] = append(got[d.WebhookID], d.EventID)
			sandbox[d.EventID] = d.Event.Sandbox
			if _, err := db.RecordDelivery(ctx, d, domain.DeliveryError{}, 200, time.Millisecond, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(got[mine.ID]) != 2 || len(got[theirs.ID]) != 1 || got[theirs.ID][0] != real {
		t.Fatalf("deliveries %v: want both events for the pushing client, only the real one for the other", got)
	}
	if !sandbox[v.EventID] || sandbox[real] {
		t.Fatalf("sandbox marks %v", sandbox)
	}
}

// A sandbox push goes into the sandbox's log (scoped to its client, the
// event in the row, the service's event id) and not the service's; the
// sandbox's synthetic events and the push share one order; a replay of a
// client takes the log's own events and its own pushes, never another
// client's.
func TestSandboxPushGoesIntoTheSandboxsLogForItsClientOnly(t *testing.T) {
	t.Parallel()
	live, sandbox := storetest.New(t), storetest.New(t)
	ctx := context.Background()
	mine, theirs := newClient(t, live, nil), newClient(t, live, nil)
	push := store.SandboxPusher{Live: live, Sandbox: sandbox}
	synthetic := func(symbol string) {
		if _, err := sandbox.Pool.Exec(ctx, `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
			VALUES ('crypto', $1, 'neutral', 'growth', 30, clock_timestamp())`, symbol); err != nil {
			t.Fatal(err)
		}
	}
	synthetic("SYN1")
	v, err := push.InsertSandboxVerdictEvent(ctx, mine.ID, domain.Crypto, "BTC_USDT", "growth", "decline", -35)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := push.InsertSandboxVerdictEvent(ctx, theirs.ID, domain.Crypto, "ETH_USDT", "neutral", "growth", 35); err != nil {
		t.Fatal(err)
	}
	synthetic("SYN2")
	all := eventually(t, sandbox, 4)
	p := all[1]
	if p.SandboxClientID != mine.ID || p.Kind != domain.EventVerdictChanged || p.Verdict == nil ||
		*p.Verdict != (domain.VerdictChange{EventID: v.EventID, Symbol: "BTC_USDT", OldVerdict: "growth", NewVerdict: "decline", OverallScore: -35, At: v.At}) {
		t.Fatalf("the push in the sandbox's log: %+v (verdict %+v), want the event %+v of client %s", p, p.Verdict, v, mine.ID)
	}
	if all[0].SandboxClientID != "" || all[0].Verdict.Symbol != "SYN1" || all[3].Verdict.Symbol != "SYN2" {
		t.Fatalf("log %+v", all)
	}
	// The hub's read (with the held-back flag) carries the push's event too.
	held, _, err := sandbox.StreamEventsHeld(ctx, domain.StreamPos{}, 100)
	if err != nil || len(held) != 4 || held[1].Verdict == nil || *held[1].Verdict != *p.Verdict {
		t.Fatalf("the hub's read of the sandbox's log: %+v (%v), want the push's event %+v second", held, err, p.Verdict)
	}
	// The service's log: the pushes are in its outbox (webhooks), not in
	// its stream.
	if events, err := live.StreamEvents(ctx, domain.StreamPos{}, 100); err != nil || len(events) != 0 {
		t.Fatalf("the service's log holds %+v (%v), want no pushes", events, err)
	}
	var outbox int
	if err := live.Pool.QueryRow(ctx, `SELECT count(*) FROM verdict_events WHERE sandbox_client_id IS NOT NULL`).Scan(&outbox); err != nil || outbox != 2 {
		t.Fatalf("the service's outbox holds %d pushes (%v), want 2", outbox, err)
	}
	f := store.StreamFilter{Markets: domain.Markets, Kinds: domain.StreamEventKinds, SandboxClientID: mine.ID}
	got, err := sandbox.ReplayStreamEvents(ctx, f, domain.StreamPos{}, all[3].Pos, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].ID != all[0].ID || got[1].ID != all[1].ID || got[2].ID != all[3].ID {
		t.Fatalf("replay of the pushing client %+v, want ids %d %d %d", got, all[0].ID, all[1].ID, all[3].ID)
	}
	f.SandboxClientID = ""
	if got, err := sandbox.ReplayStreamEvents(ctx, f, domain.StreamPos{}, all[3].Pos, 100); err != nil || len(got) != 2 ||
		got[0].SandboxClientID != "" || got[1].SandboxClientID != "" {
		t.Fatalf("replay without a client %+v (%v), want the synthetic events only", got, err)
	}
}

// eventually waits until the log holds n events (those of transactions
// that have ended: another test's open transaction holds them back a
// moment) and returns them.
func eventually(t *testing.T, db *store.DB, n int) []domain.StreamEvent {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		events, err := db.StreamEvents(context.Background(), domain.StreamPos{}, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(events) >= n {
			if len(events) > n {
				t.Fatalf("log %+v, want %d events", events, n)
			}
			return events
		}
		if time.Now().After(deadline) {
			t.Fatalf("log %+v after 10 s, want %d events", events, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
