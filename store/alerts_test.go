package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/alerting"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

func newAlert(t *testing.T, db *store.DB, c *domain.Client, name, where string, cooldown int, symbols ...string) domain.Alert {
	t.Helper()
	a := domain.Alert{ClientID: c.ID, Name: name, Market: domain.Crypto, Expression: where, CooldownSeconds: cooldown}
	if len(symbols) > 0 {
		a.Symbols = symbols
	}
	out, err := db.CreateAlert(context.Background(), a, c.Tier)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// One client never sees, reads or deletes another's alerts; the tier caps
// how many a client holds.
func TestAlertsScopedByClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	a := newClient(t, db, func(c *domain.Client) { c.Tier = domain.Starter; c.Markets = []domain.Market{domain.Crypto} })
	b := newClient(t, db, nil)
	mine := newAlert(t, db, a, "mine", `verdict == "growth"`, 0, "BTC_USDT")
	if mine.ID == "" || mine.Symbols[0] != "BTC_USDT" || mine.CreatedAt.IsZero() {
		t.Fatalf("created = %+v", mine)
	}
	if list, err := db.Alerts(ctx, b.ID); err != nil || len(list) != 0 {
		t.Fatalf("b's alerts = %+v, %v; want none", list, err)
	}
	if _, err := db.Alert(ctx, b.ID, mine.ID); domain.ErrorCode(err) != domain.ENOTFOUND {
		t.Fatalf("b reads a's alert: %v, want ENOTFOUND", err)
	}
	if err := db.DeleteAlert(ctx, b.ID, mine.ID); domain.ErrorCode(err) != domain.ENOTFOUND {
		t.Fatalf("b deletes a's alert: %v, want ENOTFOUND", err)
	}
	if got, err := db.Alert(ctx, a.ID, mine.ID); err != nil || got.Expression != mine.Expression || got.Symbols[0] != "BTC_USDT" {
		t.Fatalf("a reads its alert: %+v, %v", got, err)
	}
	for i := 1; i < domain.Starter.MaxAlerts(); i++ {
		newAlert(t, db, a, "more", `overall_score > 50`, 0)
	}
	if _, err := db.CreateAlert(ctx, domain.Alert{ClientID: a.ID, Name: "one too many", Market: domain.Crypto, Expression: "true"}, a.Tier); domain.ErrorCode(err) != domain.ECONFLICT {
		t.Fatalf("alert over the starter cap: %v, want ECONFLICT", err)
	}
	if err := db.DeleteAlert(ctx, a.ID, mine.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteAlert(ctx, a.ID, "not-a-uuid"); domain.ErrorCode(err) != domain.ENOTFOUND {
		t.Fatalf("malformed id: %v, want ENOTFOUND", err)
	}
}

// An alert fires on the rescoring that makes its condition true, in the
// transaction that stores the verdict event of that rescoring, with the
// values it read; not again while it holds; again after it was false,
// once the cooldown has passed; not on an asset it does not watch.
func TestAlertFiresOnTransitionWithCooldown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	c := newClient(t, db, nil)
	growth := newAlert(t, db, c, "growth", `verdict == "growth"`, 3600)
	newAlert(t, db, c, "eth only", `overall_score > 20`, 0, "ETH_USDT")
	m := &alerting.Matcher{}
	t0 := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	var prev map[string]store.AnalyticsRecord
	step := func(i int, score int, v analytics.Verdict) {
		t.Helper()
		rec := analyticsRecord("BTC_USDT", score, v, t0.Add(time.Duration(i)*4*time.Hour))
		if _, err := db.SaveAnalyticsAlerting(ctx, []store.AnalyticsRecord{rec}, prev, m); err != nil {
			t.Fatal(err)
		}
		prev = map[string]store.AnalyticsRecord{"BTC_USDT": rec}
	}
	step(0, 30, analytics.VerdictGrowth) // first sight: no change, no alert
	step(1, 0, analytics.VerdictNeutral)
	step(2, 30, analytics.VerdictGrowth) // fires
	step(3, 35, analytics.VerdictGrowth) // still true: no
	step(4, 0, analytics.VerdictNeutral)
	step(5, 30, analytics.VerdictGrowth) // 12 h after the firing: fires
	step(6, 0, analytics.VerdictNeutral)
	evs, err := db.AlertEvents(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	verdicts, err := db.VerdictEvents(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var toGrowth []time.Time
	for _, v := range verdicts {
		if v.NewVerdict == analytics.VerdictGrowth {
			toGrowth = append(toGrowth, v.At)
		}
	}
	if len(evs) != 2 || len(toGrowth) != 2 {
		t.Fatalf("alert events = %+v, verdict events to growth at %v; want two of each", evs, toGrowth)
	}
	for i, e := range evs {
		if e.AlertID != growth.ID || e.ClientID != c.ID || e.Symbol != "BTC_USDT" || !e.At.Equal(toGrowth[i]) || e.Read["verdict"] != "growth" {
			t.Errorf("event %d = %+v; want alert %s on BTC_USDT at %v reading verdict growth", i, e, growth.ID, toGrowth[i])
		}
		if e.ID <= 0 || (i > 0 && e.ID <= evs[i-1].ID) {
			t.Errorf("event ids %d not increasing", e.ID)
		}
	}
}

// The cooldown holds a second firing back: a transition within it moves
// the state without an event.
func TestAlertCooldownSuppresses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	c := newClient(t, db, nil)
	newAlert(t, db, c, "growth", `verdict == "growth"`, 86400)
	m := &alerting.Matcher{}
	t0 := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	var prev map[string]store.AnalyticsRecord
	for i, v := range []analytics.Verdict{analytics.VerdictNeutral, analytics.VerdictGrowth, analytics.VerdictNeutral, analytics.VerdictGrowth} {
		rec := analyticsRecord("BTC_USDT", 0, v, t0.Add(time.Duration(i)*4*time.Hour))
		if _, err := db.SaveAnalyticsAlerting(ctx, []store.AnalyticsRecord{rec}, prev, m); err != nil {
			t.Fatal(err)
		}
		prev = map[string]store.AnalyticsRecord{"BTC_USDT": rec}
	}
	evs, err := db.AlertEvents(ctx, 0, 100)
	if err != nil || len(evs) != 1 {
		t.Fatalf("events = %+v, %v; want one (the second transition is within the day's cooldown)", evs, err)
	}
}

// An alert event goes to its client's active subscriptions for the
// market, in the same queue as verdict events (one id space, in order),
// never to another client's; the delivery log names its kind.
func TestAlertEventFanOut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, box, owner := hookFixture(t)
	other := newClient(t, db, nil)
	crypto := domain.Crypto
	hook, _, err := db.CreateWebhook(ctx, box, owner.ID, "https://a.example/h", &crypto)
	if err != nil {
		t.Fatal(err)
	}
	otherHook, _, err := db.CreateWebhook(ctx, box, other.ID, "https://b.example/h", nil)
	if err != nil {
		t.Fatal(err)
	}
	newAlert(t, db, owner, "growth", `verdict == "growth"`, 0)
	m := &alerting.Matcher{}
	t0 := time.Now().UTC().Add(-time.Hour)
	first := analyticsRecord("BTC_USDT", 0, analytics.VerdictNeutral, t0)
	if _, err := db.SaveAnalyticsAlerting(ctx, []store.AnalyticsRecord{first}, nil, m); err != nil {
		t.Fatal(err)
	}
	second := analyticsRecord("BTC_USDT", 30, analytics.VerdictGrowth, t0.Add(4*time.Hour))
	if _, err := db.SaveAnalyticsAlerting(ctx, []store.AnalyticsRecord{second}, map[string]store.AnalyticsRecord{"BTC_USDT": first}, m); err != nil {
		t.Fatal(err)
	}
	if evs, err := db.AlertEvents(ctx, 0, 10); err != nil || len(evs) != 1 {
		t.Fatalf("alert events = %+v, %v; want one", evs, err)
	}
	if _, err := db.FanOut(ctx, 100); err != nil {
		t.Fatal(err)
	}
	log, err := db.WebhookDeliveries(ctx, owner.ID, hook.ID, 10)
	if err != nil || len(log) != 2 {
		t.Fatalf("owner's deliveries = %+v, %v; want the verdict event and the alert", log, err)
	}
	kinds := map[string]bool{log[0].Event: true, log[1].Event: true}
	if !kinds[domain.EventVerdictChanged] || !kinds[domain.EventAlertTriggered] {
		t.Fatalf("delivery kinds = %v", kinds)
	}
	otherLog, err := db.WebhookDeliveries(ctx, other.ID, otherHook.ID, 10)
	if err != nil || len(otherLog) != 1 || otherLog[0].Event != domain.EventVerdictChanged {
		t.Fatalf("other client's deliveries = %+v, %v; want the verdict event only", otherLog, err)
	}
	// The claim sends the verdict event first (its id is lower), then the
	// alert, with the alert's body fields.
	var got []store.Delivery
	for range 2 {
		ds, err := db.ClaimDeliveries(ctx, box, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.WebhookID == hook.ID {
				got = append(got, d)
			}
			if _, err := db.RecordDelivery(ctx, d, domain.DeliveryError{}, 200, time.Millisecond, time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(got) != 2 || got[0].Kind != domain.EventVerdictChanged || got[1].Kind != domain.EventAlertTriggered ||
		got[1].Alert.Symbol != "BTC_USDT" || got[1].Alert.Read["verdict"] != "growth" || got[1].EventID <= got[0].EventID {
		t.Fatalf("claimed = %+v", got)
	}
}

// The saves keep the alerts in memory and follow every change of an alert
// or of its client through alert_generation: a new alert is evaluated at
// the next save, a deleted one and a suspended client's are not, whether
// the save finds its copy stale and reloads it or reads the table while a
// reload waits its turn.
func TestAlertCopyFollowsChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	c := newClient(t, db, nil)
	other := newClient(t, db, nil)
	m := &alerting.Matcher{}
	flipWith := flipper(t, db)
	flip := func(reload bool) { t.Helper(); flipWith(m, reload) }
	fired := func() map[string]int {
		t.Helper()
		evs, err := db.AlertEvents(ctx, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, e := range evs {
			out[e.AlertName]++
		}
		return out
	}
	newAlert(t, db, c, "named", `overall_score > 50`, 0, "BTC_USDT")
	newAlert(t, db, other, "whole", `overall_score > 50`, 0)
	flip(true) // first sight of the asset at 0, then fires
	gen, loaded := store.AlertIndexGeneration(db)
	if !loaded {
		t.Fatal("the saves did not load their copy of the alerts")
	}
	flip(false) // the copy is current: both fire again
	if g, _ := store.AlertIndexGeneration(db); g != gen {
		t.Fatalf("copy reloaded at generation %d without a change (was %d)", g, gen)
	}
	if got := fired(); got["named"] != 2 || got["whole"] != 2 {
		t.Fatalf("fired %v, want named and whole twice each", got)
	}

	for _, reload := range []bool{true, false} {
		added := newAlert(t, db, c, "added", `overall_score > 50`, 0, "BTC_USDT")
		if _, err := db.SetClientStatus(ctx, other.ID, domain.StatusSuspended); err != nil {
			t.Fatal(err)
		}
		before := fired()
		flip(reload)
		after := fired()
		if after["added"] != before["added"]+1 || after["named"] != before["named"]+1 || after["whole"] != before["whole"] {
			t.Fatalf("reload %v: fired %v after %v; want added and named once more, whole (suspended) not", reload, after, before)
		}
		if err := db.DeleteAlert(ctx, c.ID, added.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := db.SetClientStatus(ctx, other.ID, domain.StatusActive); err != nil {
			t.Fatal(err)
		}
		before = after
		flip(reload)
		after = fired()
		if after["added"] != before["added"] || after["named"] != before["named"]+1 || after["whole"] != before["whole"]+1 {
			t.Fatalf("reload %v: fired %v after %v; want named and whole once more, added (deleted) not", reload, after, before)
		}
	}
	if g, _ := store.AlertIndexGeneration(db); g <= gen {
		t.Fatalf("copy still at generation %d after the changes", g)
	}
}

// An alert deleted while a save evaluates it (after the save read its
// alerts, before it wrote their states) takes its states with it: the save
// waits for the delete, then stores the rescoring without the deleted
// alert's state (its insert joins the alert's row, now gone). A client deleted
// so (its alerts with it) leaves no alert event behind either: the events
// have no foreign key (migration 00036), and the save's insert skips a
// client whose row is gone.
func TestAlertDeletedDuringASave(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, delete string
		client       bool // the client's id, else the alert's
	}{
		{"alert", `DELETE FROM alerts WHERE id = $1`, false},
		{"client", `DELETE FROM clients WHERE id = $1`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			deletedDuringASave(t, tc.delete, tc.client)
		})
	}
}

func deletedDuringASave(t *testing.T, deleteSQL string, client bool) {
	ctx := context.Background()
	db := storetest.New(t)
	c := newClient(t, db, nil)
	doomed := newAlert(t, db, c, "doomed", `overall_score > 50`, 0, "BTC_USDT")
	m := &alerting.Matcher{}
	t0 := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	first := analyticsRecord("BTC_USDT", 0, analytics.VerdictNeutral, t0)
	if _, err := db.SaveAnalyticsAlerting(ctx, []store.AnalyticsRecord{first}, nil, m); err != nil {
		t.Fatal(err)
	}
	del, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer del.Rollback(ctx) //nolint:errcheck
	var pid int
	if err := del.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	id := doomed.ID
	if client {
		id = c.ID
	}
	if _, err := del.Exec(ctx, deleteSQL, id); err != nil {
		t.Fatal(err)
	}
	second := analyticsRecord("BTC_USDT", 90, analytics.VerdictNeutral, t0.Add(4*time.Hour))
	done := make(chan error, 1)
	go func() {
		_, err := db.SaveAnalyticsAlerting(ctx, []store.AnalyticsRecord{second}, map[string]store.AnalyticsRecord{"BTC_USDT": first}, m)
		done <- err
	}()
	// The save reads the alert (the delete has not committed) and waits
	// for the delete's lock on it when it writes the state.
	waitBlockedBy(t, db, pid, done, "the save", "the delete")
	if err := del.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("save with the alert deleted under it: %v", err)
	}
	var states, events int
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM alert_states), (SELECT count(*) FROM alert_events)`).Scan(&states, &events); err != nil {
		t.Fatal(err)
	}
	var score int
	if err := db.Pool.QueryRow(ctx, `SELECT overall_score FROM analytics_reports WHERE symbol = 'BTC_USDT'`).Scan(&score); err != nil {
		t.Fatal(err)
	}
	if states != 0 || score != 90 {
		t.Fatalf("after the save: %d alert states, report score %d; want none and 90", states, score)
	}
	if client && events != 0 {
		t.Fatalf("after the save: %d alert events of the deleted client, want none", events)
	}
}

// A save keeps the asset's alert states for the next save of its process,
// and they are used only while no one else has saved the asset: another
// process's save (another handle on the same schema) moves the reports'
// versions, and the next save reads the states again. With a stale copy
// the last rescoring would not fire (its state would still be "true").
func TestAlertStatesKeptOnlyWhileCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := storetest.CreateSchema(t)
	a, b := storetest.Open(t, schema), storetest.Open(t, schema)
	c := newClient(t, a, nil)
	newAlert(t, a, c, "above", `overall_score > 50`, 0, "BTC_USDT")
	m := &alerting.Matcher{}
	t0 := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	var prev map[string]store.AnalyticsRecord
	i := 0
	save := func(db *store.DB, score int) {
		t.Helper()
		rec := analyticsRecord("BTC_USDT", score, analytics.VerdictNeutral, t0.Add(time.Duration(i)*4*time.Hour))
		i++
		if _, err := db.SaveAnalyticsAlerting(ctx, []store.AnalyticsRecord{rec}, prev, m); err != nil {
			t.Fatal(err)
		}
		prev = map[string]store.AnalyticsRecord{"BTC_USDT": rec}
	}
	fired := func() int {
		t.Helper()
		evs, err := a.AlertEvents(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	save(a, 0)
	save(a, 90) // fires; a keeps the state (true)
	if n, ok := store.AlertStatesKept(a, domain.Crypto, "BTC_USDT"); !ok || n != 1 {
		t.Fatalf("a keeps %d states (%v) after its save, want 1", n, ok)
	}
	save(b, 0)  // false, written by the other process
	save(a, 90) // fires: a's copy says true, but the reports moved
	if got := fired(); got != 2 {
		t.Fatalf("%d alerts fired, want 2 (the one after the other process's save read the states again)", got)
	}
	save(a, 0)
	save(a, 90) // a's own saves: its copy is current, and fires
	save(a, 95) // still true: no
	if got := fired(); got != 3 {
		t.Fatalf("%d alerts fired, want 3", got)
	}
}

// Alerts fire the same whether the states come from the process's copy or
// from the table: a random sequence of saves (assets in batches, the four
// styles, two processes taking turns on one schema) against the same
// sequence saved by a process that reads every state, over conditions on
// one style, two styles, the screener row and with cooldowns.
func TestAlertStatesKeptEqualRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := storetest.CreateSchema(t)
	kept := []*store.DB{storetest.Open(t, schema), storetest.Open(t, schema)}
	read := storetest.New(t)
	syms := []string{"A_USDT", "B_USDT", "C_USDT", "D_USDT", "E_USDT", "F_USDT"}
	conds := []string{`overall_score > 40`, `verdict == "growth"`, `swing.verdict == "growth" && scalp.overall_score > 20`,
		`intraday.overall_score < -10`, `position.verdict == "decline" || scalp.verdict == "decline"`, `price > 50.0 && swing.overall_score > 0`}
	for _, db := range []*store.DB{kept[0], read} {
		c := newClient(t, db, nil)
		for i, cond := range conds {
			newAlert(t, db, c, fmt.Sprintf("w%d", i), cond, []int{0, 0, 3 * 3600}[i%3])
			newAlert(t, db, c, fmt.Sprintf("n%d", i), cond, 0, syms[i], syms[(i+2)%len(syms)])
		}
	}
	m := &alerting.Matcher{}
	rng := rand.New(rand.NewPCG(36, 7))
	t0 := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	verdicts := []analytics.Verdict{analytics.VerdictGrowth, analytics.VerdictNeutral, analytics.VerdictDecline}
	prev := map[analytics.Style]map[string]store.AnalyticsRecord{}
	for step := range 300 {
		st := analytics.Styles[rng.IntN(len(analytics.Styles))]
		at := t0.Add(time.Duration(step) * time.Hour)
		var recs []store.AnalyticsRecord
		for _, s := range syms {
			if rng.IntN(2) == 0 {
				score := rng.IntN(121) - 60
				rec := analyticsRecord(s, score, verdicts[rng.IntN(len(verdicts))], at)
				rec.Style = st
				recs = append(recs, rec)
			}
		}
		db := kept[rng.IntN(2)]
		if _, err := db.SaveAnalyticsAlerting(ctx, recs, prev[st], m); err != nil {
			t.Fatal(err)
		}
		store.ForgetAlertStates(read)
		if _, err := read.SaveAnalyticsAlerting(ctx, recs, prev[st], m); err != nil {
			t.Fatal(err)
		}
		if prev[st] == nil {
			prev[st] = map[string]store.AnalyticsRecord{}
		}
		for _, r := range recs {
			prev[st][r.Symbol] = r
		}
	}
	events := func(db *store.DB) []string {
		t.Helper()
		evs, err := db.AlertEvents(ctx, 0, 10000)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range evs {
			out = append(out, fmt.Sprintf("%s %s %s", e.At.Format(time.RFC3339), e.AlertName, e.Symbol))
		}
		slices.Sort(out) // a save writes its events in alert id order, and the ids differ
		return out
	}
	got, want := events(kept[0]), events(read)
	if len(want) < 50 {
		t.Fatalf("only %d alerts fired: the sequence does not exercise the states", len(want))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("alerts with the kept states differ from those with the states read:\n%v\nwant\n%v", got, want)
	}
	if n, ok := store.AlertStatesKept(kept[0], domain.Crypto, "A_USDT"); !ok && n == 0 {
		if n, ok = store.AlertStatesKept(kept[1], domain.Crypto, "A_USDT"); !ok {
			t.Fatal("neither process kept A_USDT's states")
		}
	}
}

// flipper returns flip, which saves BTC_USDT's report false then true for
// the alerts of these tests (score 0 then 90, 4 hours apart from the last
// save), through matcher m, reloading the copy of the alerts first when
// reload is set.
func flipper(t *testing.T, db *store.DB) (flip func(m store.AlertMatcher, reload bool)) {
	t0 := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	var prev map[string]store.AnalyticsRecord
	i := 0
	return func(m store.AlertMatcher, reload bool) {
		t.Helper()
		for _, score := range []int{0, 90} {
			if reload {
				store.AllowAlertReload(db)
			}
			rec := analyticsRecord("BTC_USDT", score, analytics.VerdictNeutral, t0.Add(time.Duration(i)*4*time.Hour))
			i++
			if _, err := db.SaveAnalyticsAlerting(context.Background(), []store.AnalyticsRecord{rec}, prev, m); err != nil {
				t.Fatal(err)
			}
			prev = map[string]store.AnalyticsRecord{"BTC_USDT": rec}
		}
	}
}

// countingMatcher counts the conditions it resolves.
type countingMatcher struct {
	store.AlertMatcher
	calls atomic.Int64
}

func (c *countingMatcher) Condition(a domain.Alert) store.AlertCondition {
	c.calls.Add(1)
	return c.AlertMatcher.Condition(a)
}

// valueMatcher is a matcher that is not a pointer (and that == cannot
// compare: a func field).
type valueMatcher struct {
	inner store.AlertMatcher
	count func()
}

func (v valueMatcher) Condition(a domain.Alert) store.AlertCondition {
	v.count()
	return v.inner.Condition(a)
}

// A save's alerts come with their conditions resolved once per copy of
// the alerts (not once a save); a changed alert is resolved again with the
// new copy; a matcher that is not a pointer is asked every save. Each
// save that fires reports its alerts after its commit (OnAlertsFired).
func TestAlertConditionsResolvedOncePerCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	c := newClient(t, db, nil)
	var reported atomic.Int64
	db.OnAlertsFired(func(n int) { reported.Add(int64(n)) })
	flip := flipper(t, db)
	newAlert(t, db, c, "named", `overall_score > 50`, 0, "BTC_USDT")
	newAlert(t, db, c, "whole", `overall_score > 50`, 0)
	m := &countingMatcher{AlertMatcher: &alerting.Matcher{}}
	flip(m, true)
	flip(m, false)
	flip(m, false)
	if n := m.calls.Load(); n != 2 {
		t.Fatalf("six saves resolved %d conditions, want the two alerts' once", n)
	}
	newAlert(t, db, c, "added", `overall_score > 50`, 0, "BTC_USDT")
	flip(m, true)
	if n := m.calls.Load(); n != 5 {
		t.Fatalf("after an alert was added, %d conditions resolved in all, want 2 + the new copy's 3", n)
	}
	var perSave atomic.Int64
	flip(valueMatcher{inner: &alerting.Matcher{}, count: func() { perSave.Add(1) }}, false)
	if n := perSave.Load(); n != 6 {
		t.Fatalf("a matcher that is not a pointer: %d conditions resolved in two saves, want 3 a save", n)
	}
	evs, err := db.AlertEvents(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 || reported.Load() != int64(len(evs)) {
		t.Fatalf("OnAlertsFired reported %d alerts, the outbox has %d", reported.Load(), len(evs))
	}
}

// A client's alert events go with the client (migration 00036's trigger,
// in place of the foreign key's cascade), whatever the deleting session's
// search_path (an operator's, qualifying the table); another client's stay.
func TestAlertEventsGoWithTheirClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	gone, kept := newClient(t, db, nil), newClient(t, db, nil)
	for _, c := range []*domain.Client{gone, kept} {
		a := newAlert(t, db, c, "any", `overall_score > 0`, 0)
		if _, err := db.Pool.Exec(ctx, `INSERT INTO alert_events (alert_id, alert_name, client_id, market, symbol, at, read)
			VALUES ($1, 'any', $2, 'crypto', 'BTC_USDT', now(), '{}')`, a.ID, c.ID); err != nil {
			t.Fatal(err)
		}
	}
	execAsOperator(t, db, func(schema string) (string, []any) {
		return `DELETE FROM ` + pgx.Identifier{schema, "clients"}.Sanitize() + ` WHERE id = $1`, []any{gone.ID}
	})
	for c, want := range map[*domain.Client]int{gone: 0, kept: 1} {
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM alert_events WHERE client_id = $1`, c.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("client %s: %d alert events after the delete, want %d", c.ID, n, want)
		}
	}
}

// An alert's states go with the alert (migration 00037's triggers, in place
// of the foreign key's cascade): deleted alone, with its client, or with
// every alert by a TRUNCATE, whatever the deleting session's search_path
// (an operator's, qualifying the table); another alert's states stay.
func TestAlertStatesGoWithTheirAlert(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, delete string
		client       bool // the statement takes the client's id, else the alert's
		keeps        bool // the other alert's states stay
	}{
		{"alert", `DELETE FROM %s WHERE id = $1`, false, true},
		{"client", `DELETE FROM %s WHERE id = $1`, true, true},
		{"truncate", `TRUNCATE %s CASCADE`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := storetest.New(t)
			gone, kept := newClient(t, db, nil), newClient(t, db, nil)
			doomed := newAlert(t, db, gone, "doomed", `overall_score > 0`, 0)
			other := newAlert(t, db, kept, "other", `overall_score > 0`, 0)
			for _, a := range []domain.Alert{doomed, other} {
				if _, err := db.Pool.Exec(ctx, `INSERT INTO alert_states (alert_id, symbol, matched, evaluated_at)
					VALUES ($1, 'BTC_USDT', true, now()), ($1, 'ETH_USDT', false, now())`, a.ID); err != nil {
					t.Fatal(err)
				}
			}
			execAsOperator(t, db, func(schema string) (string, []any) {
				table, id := pgx.Identifier{schema, "alerts"}.Sanitize(), doomed.ID
				if tc.client {
					table, id = pgx.Identifier{schema, "clients"}.Sanitize(), gone.ID
				}
				var args []any
				if strings.Contains(tc.delete, "$1") {
					args = append(args, id)
				}
				return fmt.Sprintf(tc.delete, table), args
			})
			want := map[string]int{doomed.ID: 0, other.ID: 2}
			if !tc.keeps {
				want[other.ID] = 0
			}
			for a, n := range want {
				var got int
				if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM alert_states WHERE alert_id = $1`, a).Scan(&got); err != nil {
					t.Fatal(err)
				}
				if got != n {
					t.Errorf("alert %s: %d states after the %s, want %d", a, got, tc.name, n)
				}
			}
		})
	}
}

// A state a save inserts before an alert's delete (the save holds the
// alert's row locked FOR KEY SHARE, as the service's insert does, and the
// delete waits for it) is taken by the delete once the save commits: the
// trigger's delete, in READ COMMITTED, sees it.
func TestAlertStateSavedBeforeTheAlertsDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	c := newClient(t, db, nil)
	doomed := newAlert(t, db, c, "doomed", `overall_score > 0`, 0, "BTC_USDT")
	save, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer save.Rollback(ctx) //nolint:errcheck // no-op after commit
	var pid int
	if err := save.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	tag, err := save.Exec(ctx, `INSERT INTO alert_states (alert_id, symbol, matched, evaluated_at)
		SELECT u.* FROM (VALUES ($1::uuid, 'BTC_USDT', true, now())) AS u(alert_id, symbol, matched, evaluated_at)
		JOIN alerts a ON a.id = u.alert_id
		FOR KEY SHARE OF a`, doomed.ID)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("the save's insert: %v (%d rows)", err, tag.RowsAffected())
	}
	done := make(chan error, 1)
	go func() {
		_, err := db.Pool.Exec(ctx, `DELETE FROM alerts WHERE id = $1`, doomed.ID)
		done <- err
	}()
	waitBlockedBy(t, db, pid, done, "the delete", "the save")
	if err := save.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM alert_states WHERE alert_id = $1`, doomed.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d states of the deleted alert left, want 0", n)
	}
}

// waitBlockedBy waits until a session waits for a lock the backend pid
// holds; done reports the waiter's end (which fails the test: it ended
// without waiting). waiter and holder name them in the failures.
func waitBlockedBy(t *testing.T, db *store.DB, pid int, done <-chan error, waiter, holder string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))`,
			pid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("%s ended (%v) without waiting for %s", waiter, err, holder)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never waited for %s", waiter, holder)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// execAsOperator commits the statement stmt builds from the test's schema
// in a session whose search_path does not hold it (an operator's, which
// qualifies the table): what its triggers do must reach the schema's own
// tables.
func execAsOperator(t *testing.T, db *store.DB, stmt func(schema string) (string, []any)) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	var schema string
	if err := tx.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL search_path TO public`); err != nil {
		t.Fatal(err)
	}
	sql, args := stmt(schema)
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// Two saves of different styles on one asset evaluate its alerts one
// after the other, the second on the first's committed report: a
// condition over both styles, made true by the two saves together, fires
// once. Evaluated side by side, each save would see the other style's old
// report, and the alert would never fire.
func TestAlertSavesOfTwoStylesOnAnAssetTakeTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	c := newClient(t, db, nil)
	newAlert(t, db, c, "both", `swing.verdict == "growth" && scalp.verdict == "growth"`, 0)
	t0 := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	record := func(style analytics.Style, v analytics.Verdict, at time.Time) store.AnalyticsRecord {
		r := analyticsRecord("BTC_USDT", 50, v, at)
		r.Style = style
		return r
	}
	m := &alerting.Matcher{}
	swing0, scalp0 := record(analytics.Swing, analytics.VerdictNeutral, t0), record(analytics.Scalp, analytics.VerdictNeutral, t0)
	for _, r := range []store.AnalyticsRecord{swing0, scalp0} {
		if _, err := db.SaveAnalyticsAlerting(ctx, []store.AnalyticsRecord{r}, nil, m); err != nil {
			t.Fatal(err)
		}
	}
	t1 := t0.Add(4 * time.Hour)
	// The swing save stops in its evaluation, its locks held.
	held := &heldMatcher{Matcher: &alerting.Matcher{}, entered: make(chan struct{}), release: make(chan struct{})}
	var released sync.Once
	release := func() { released.Do(func() { close(held.release) }) }
	t.Cleanup(release) // a failed test's save ends before its schema is dropped
	swingDone := make(chan error, 1)
	go func() {
		_, err := db.SaveAnalyticsAlerting(ctx, []store.AnalyticsRecord{record(analytics.Swing, analytics.VerdictGrowth, t1)},
			map[string]store.AnalyticsRecord{"BTC_USDT": swing0}, held)
		swingDone <- err
	}()
	select {
	case <-held.entered:
	case err := <-swingDone:
		t.Fatalf("the swing save ended (%v) without evaluating", err)
	}
	// Its backend: the one of this schema's reports' locks, idle in its
	// transaction while the save evaluates in Go.
	var pid int
	if err := db.Pool.QueryRow(ctx, `SELECT a.pid FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
		WHERE l.locktype = 'relation' AND l.relation = 'analytics_reports'::regclass AND a.state = 'idle in transaction'`).Scan(&pid); err != nil {
		t.Fatalf("the swing save's backend: %v", err)
	}
	scalpDone := make(chan error, 1)
	go func() {
		_, err := db.SaveAnalyticsAlerting(ctx, []store.AnalyticsRecord{record(analytics.Scalp, analytics.VerdictGrowth, t1)},
			map[string]store.AnalyticsRecord{"BTC_USDT": scalp0}, m)
		scalpDone <- err
	}()
	waitBlockedBy(t, db, pid, scalpDone, "the scalp save", "the swing save")
	release()
	for _, done := range []chan error{swingDone, scalpDone} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	var events int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM alert_events WHERE symbol = 'BTC_USDT'`).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if events != 1 {
		t.Fatalf("%d alert events after both styles turned growth, want 1", events)
	}
}

// heldMatcher is a matcher whose first evaluation waits for release.
type heldMatcher struct {
	*alerting.Matcher
	entered, release chan struct{}
	once             sync.Once
}

func (h *heldMatcher) Condition(a domain.Alert) store.AlertCondition {
	return heldCondition{h.Matcher.Condition(a), h}
}

type heldCondition struct {
	store.AlertCondition
	h *heldMatcher
}

func (c heldCondition) Match(asset *store.AlertAsset) (bool, error) {
	c.h.once.Do(func() {
		close(c.h.entered)
		<-c.h.release
	})
	return c.AlertCondition.Match(asset)
}
