package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// A plain "id > last seen" reader skips id 1 for ever when id 2 commits
// first and is read before id 1 commits. The stream's rows are numbered at
// commit, in commit order: the late commit comes after what was read, and
// the reader waits for no open transaction.
func TestStreamEventsNeverSkipALateCommit(t *testing.T) {
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
	// The open writer holds nothing back.
	events, err := db.StreamEvents(ctx, domain.StreamPos{}, 10)
	if err != nil || len(events) != 1 || events[0].Verdict.Symbol != "LATER" {
		t.Fatalf("while an earlier writer is open the stream gave %+v (%v), want LATER", events, err)
	}
	later := events[0]
	if p, err := db.LastStreamPos(ctx); err != nil || p != later.Pos {
		t.Fatalf("last position %+v (%v), want LATER's %+v", p, err, later.Pos)
	}
	if err := early.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The late commit comes after the position already read.
	rest, err := db.StreamEvents(ctx, later.Pos, 10)
	if err != nil || len(rest) != 1 || rest[0].Verdict.Symbol != "EARLY" || !rest[0].Pos.After(later.Pos) {
		t.Fatalf("after LATER: %+v (%v), want EARLY after it", rest, err)
	}
	if rest, err := db.StreamEvents(ctx, rest[0].Pos, 10); err != nil || len(rest) != 0 {
		t.Fatalf("after the last: %+v (%v)", rest, err)
	}
	if p, ok, err := db.StreamPosOf(ctx, later.ID); err != nil || !ok || p != later.Pos {
		t.Fatalf("position of id %d: %+v %v %v", later.ID, p, ok, err)
	}
	if _, ok, err := db.StreamPosOf(ctx, 1<<40); err != nil || ok {
		t.Fatalf("an id never given: %v %v", ok, err)
	}
}

// Writers committing at once, in transactions of several events that
// stay open a random while, and a reader following "after the last
// position read" as fast as it can: the reader gets every committed event
// exactly once, and a rolled-back transaction's none.
func TestStreamReaderFollowingConcurrentWritersGetsEveryEventOnce(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	const writers, txs, perTx = 6, 15, 2
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range txs {
				tx, err := db.Pool.Begin(ctx)
				if err != nil {
					errs <- err
					return
				}
				for j := range perTx {
					if _, err := tx.Exec(ctx, `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
						VALUES ('crypto', $1, 'neutral', 'growth', 30, clock_timestamp())`, fmt.Sprintf("W%dT%dE%d", w, i, j)); err != nil {
						errs <- err
						return
					}
					time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
				}
				if i%5 == 4 {
					err = tx.Rollback(ctx)
				} else {
					err = tx.Commit(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(errs) }()
	want := writers * (txs - txs/5) * perTx
	seen := map[string]bool{}
	var after domain.StreamPos
	deadline := time.Now().Add(30 * time.Second)
	for len(seen) < want {
		events, err := db.StreamEvents(ctx, after, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if seen[e.Verdict.Symbol] {
				t.Fatalf("%s read twice", e.Verdict.Symbol)
			}
			seen[e.Verdict.Symbol] = true
			after = e.Pos
		}
		if time.Now().After(deadline) {
			t.Fatalf("read %d of %d events in 30 s: a late commit was skipped", len(seen), want)
		}
	}
	for err := range errs {
		t.Fatal(err)
	}
	var committed int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM stream_events`).Scan(&committed); err != nil || committed != want {
		t.Fatalf("the log holds %d rows (%v), want %d", committed, err, want)
	}
	for s := range seen {
		for _, rolledBack := range []string{"T4E", "T9E", "T14E"} {
			if strings.Contains(s, rolledBack) {
				t.Fatalf("%s of a rolled-back transaction was read", s)
			}
		}
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
	// A range that ends before spot's newest refresh: spot's older one is
	// superseded by that newer one, which follows the range (live), so
	// the range replays perp and the verdict only.
	upTo := all[3].Pos
	if got, err := db.ReplayStreamEvents(ctx, f, domain.StreamPos{}, upTo, 100); err != nil || len(got) != 2 ||
		got[0].Instrument != "perpetual" || got[1].Verdict == nil || got[1].Verdict.Symbol != "A" {
		t.Fatalf("replay up to %+v: %+v (%v), want perp's refresh and verdict A", upTo, got, err)
	}
	// One kind only.
	f.Kinds = []string{domain.EventScreener}
	if got, err := db.ReplayStreamEvents(ctx, f, domain.StreamPos{}, last, 100); err != nil || len(got) != 2 ||
		got[0].Instrument != "perpetual" || got[1].Instrument != "spot" {
		t.Fatalf("screener replay %+v (%v)", got, err)
	}
	f.Kinds = []string{domain.EventVerdictChanged}
	if got, err := db.ReplayStreamEvents(ctx, f, got[0].Pos, last, 100); err != nil || len(got) != 1 || got[0].Verdict.Symbol != "A" {
		t.Fatalf("verdict replay %+v (%v)", got, err)
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
		*p.Verdict != (domain.VerdictChange{EventID: v.EventID, Symbol: "BTC_USDT", OldVerdict: "growth", NewVerdict: "decline", OverallScore: -35, At: v.At,
			ModelVersion: analytics.CurrentVersion().Name}) {
		t.Fatalf("the push in the sandbox's log: %+v (verdict %+v), want the event %+v of client %s", p, p.Verdict, v, mine.ID)
	}
	if all[0].SandboxClientID != "" || all[0].Verdict.Symbol != "SYN1" || all[3].Verdict.Symbol != "SYN2" {
		t.Fatalf("log %+v", all)
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

// eventually waits until the log holds n events (their transactions
// committed) and returns them.
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

// The prune deletes the events older than its bound (and the combinations'
// newest screener events among them), the others stay readable and
// replayable, and an id it deleted has no position any more.
func TestPruneStreamEventsDeletesOnlyOlderEvents(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	spot := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "spot"}
	perp := domain.Combination{Market: domain.Crypto, Exchange: "binance", Instrument: "perpetual"}
	for _, c := range []domain.Combination{spot, perp, spot} {
		if err := db.ReplaceTickers(ctx, c, []domain.Ticker{{Symbol: "BTC_USDT", Price: 1, Volume: 1, UpdatedAt: time.Now()}}); err != nil {
			t.Fatal(err)
		}
	}
	all := eventually(t, db, 3)
	// spot's first refresh and perp's only one are 49 hours old.
	if _, err := db.Pool.Exec(ctx, `UPDATE stream_events SET at = now() - interval '49 hours' WHERE id = ANY($1)`,
		[]int64{all[0].ID, all[1].ID}); err != nil {
		t.Fatal(err)
	}
	n, err := db.PruneStreamEvents(ctx, time.Now().Add(-domain.StreamRetention))
	if err != nil || n != 2 {
		t.Fatalf("pruned %d (%v), want 2", n, err)
	}
	if _, ok, err := db.StreamPosOf(ctx, all[0].ID); err != nil || ok {
		t.Fatalf("a pruned id still has a position (%v)", err)
	}
	f := store.StreamFilter{Markets: domain.Markets, Kinds: domain.StreamEventKinds}
	got, err := db.ReplayStreamEvents(ctx, f, domain.StreamPos{}, all[2].Pos, 100)
	if err != nil || len(got) != 1 || got[0].ID != all[2].ID {
		t.Fatalf("replay after the prune %+v (%v), want spot's newest refresh only", got, err)
	}
	var latest int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM stream_screener_latest`).Scan(&latest); err != nil || latest != 1 {
		t.Fatalf("%d combinations with a newest event (%v), want spot's only", latest, err)
	}
}

// A log written before the log was numbered at commit keeps its order
// ((transaction, id), as it was read then) when migration 00016 numbers
// it, so the ids clients hold resume where they left off; rows written
// after come after them.
func TestNumberingTheLogKeepsTheOrderItWasReadIn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := storetest.CreateSchema(t)
	db, err := store.Open(ctx, storetest.DatabaseURL(), store.Options{Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if err := store.MigrateTo(db, ctx, 13); err != nil {
		t.Fatal(err)
	}
	insert := `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
		VALUES ('crypto', $1, 'neutral', 'growth', 30, clock_timestamp())`
	a, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Rollback(ctx) //nolint:errcheck
	// A's transaction is older than B's.
	if _, err := a.Exec(ctx, insert, "A1"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, insert, "B1"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Exec(ctx, insert, "A2"); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, insert, "C1"); err != nil {
		t.Fatal(err)
	}
	events := eventually(t, db, 4)
	var got []string
	for _, e := range events {
		got = append(got, e.Verdict.Symbol)
	}
	if fmt.Sprint(got) != "[A1 A2 B1 C1]" {
		t.Fatalf("order after numbering %v, want [A1 A2 B1 C1] ((transaction, id), then commits after)", got)
	}
	// A client that had A2 (its id, from before) resumes with B1.
	p, ok, err := db.StreamPosOf(ctx, events[1].ID)
	if err != nil || !ok {
		t.Fatalf("position of A2's id: %v %v", ok, err)
	}
	if rest, err := db.StreamEvents(ctx, p, 10); err != nil || len(rest) != 2 || rest[0].Verdict.Symbol != "B1" {
		t.Fatalf("after A2: %+v (%v), want B1, C1", rest, err)
	}
}

// A transaction's stream rows are numbered in one pass when it commits,
// in id order; rows written after a mid-transaction SET CONSTRAINTS
// IMMEDIATE (which numbers those before) are numbered at commit after
// them, and stream_screener_latest names the newest screener row.
func TestStreamNumbersATransactionsRowsInIDOrder(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	c := &domain.Client{OrgName: "numbered", Tier: domain.Enterprise, Markets: domain.Markets}
	if err := db.CreateClient(ctx, c); err != nil {
		t.Fatal(err)
	}
	screener := `INSERT INTO stream_events (kind, market, exchange, instrument) VALUES ('screener', 'crypto', 'binance', 'spot')`
	alert := `INSERT INTO stream_events (kind, market, payload) VALUES ('alert', 'crypto', '{}')`
	// A save's alert events: their stream rows are inserted numbered, after
	// the transaction's earlier rows are (the trigger takes the lock).
	alertEvents := `INSERT INTO alert_events (alert_id, alert_name, client_id, market, symbol, at, read)
		SELECT gen_random_uuid(), 'a', '` + c.ID + `', 'crypto', s, now(), '{}' FROM unnest(ARRAY['B_USDT', 'A_USDT']) AS s`
	numberedNow := `DO $$ BEGIN IF EXISTS (SELECT 1 FROM stream_events WHERE seq IS NULL) THEN
		RAISE EXCEPTION 'rows left unnumbered after the alert events'; END IF; END $$`
	for _, q := range []string{screener, alert, alertEvents, numberedNow, screener, alertEvents, `SET CONSTRAINTS ALL IMMEDIATE`, alert, screener, alert} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Pool.Query(ctx, `SELECT id, seq, kind FROM stream_events ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		id   int64
		seq  *int64
		kind string
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.id, &x.seq, &x.kind)
	})
	if err != nil || len(got) != 10 {
		t.Fatalf("rows %+v (%v), want 10", got, err)
	}
	var lastScreener row
	for i, r := range got {
		if r.seq == nil {
			t.Fatalf("row %d (id %d) was not numbered", i, r.id)
		}
		if i > 0 && *r.seq <= *got[i-1].seq {
			t.Fatalf("row id %d has seq %d after id %d's %d: not in id order", r.id, *r.seq, got[i-1].id, *got[i-1].seq)
		}
		if r.kind == "screener" {
			lastScreener = r
		}
	}
	var eventID, seq int64
	if err := db.Pool.QueryRow(ctx, `SELECT event_id, seq FROM stream_screener_latest
		WHERE market = 'crypto' AND exchange = 'binance' AND instrument = 'spot'`).Scan(&eventID, &seq); err != nil {
		t.Fatal(err)
	}
	if eventID != lastScreener.id || seq != *lastScreener.seq {
		t.Fatalf("latest screener event %d (seq %d), want %d (seq %d)", eventID, seq, lastScreener.id, *lastScreener.seq)
	}
}
