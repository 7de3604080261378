package store_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

func hookFixture(t *testing.T) (*store.DB, *domain.SecretBox, *domain.Client) {
	t.Helper()
	db := storetest.New(t)
	box, err := domain.NewSecretBox(bytes.Repeat([]byte{5}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return db, box, newClient(t, db, nil)
}

func verdictEvent(t *testing.T, db *store.DB, symbol string) int64 {
	t.Helper()
	var id int64
	if err := db.Pool.QueryRow(context.Background(), `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
		VALUES ('crypto', $1, 'neutral', 'growth', 30, now()) RETURNING id`, symbol).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// A subscription has at most one delivery claimed at a time, its oldest;
// a claim whose lease ran out is taken over, and then only the new holder
// records: the old holder's outcome is refused and counts nothing.
func TestClaimLeaseAndFencing(t *testing.T) {
	t.Parallel()
	db, box, c := hookFixture(t)
	ctx := context.Background()
	hook, _, err := db.CreateWebhook(ctx, box, c.ID, "https://hooks.example.com/a", nil)
	if err != nil {
		t.Fatal(err)
	}
	first := verdictEvent(t, db, "BTC_USDT")
	second := verdictEvent(t, db, "ETH_USDT")
	if n, err := db.FanOut(ctx, 100); err != nil || n != 2 {
		t.Fatalf("FanOut = %d, %v", n, err)
	}
	claim := func() []store.Delivery {
		t.Helper()
		ds, err := db.ClaimDeliveries(ctx, box, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	ds := claim()
	if len(ds) != 1 || ds[0].EventID != first || ds[0].Attempt != 1 || ds[0].Secret == "" || ds[0].LeaseToken == "" {
		t.Fatalf("first claim: %+v, want only the oldest event %d", ds, first)
	}
	if again := claim(); len(again) != 0 {
		t.Fatalf("a leased subscription was claimed again: %+v", again)
	}
	// The lease runs out (a dead or stalled worker): another worker takes it.
	if _, err := db.Pool.Exec(ctx, `UPDATE webhooks SET lease_until = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	taken := claim()
	if len(taken) != 1 || taken[0].EventID != first || taken[0].Attempt != 2 || taken[0].LeaseToken == ds[0].LeaseToken {
		t.Fatalf("take-over claim: %+v", taken)
	}
	fail := domain.DeliveryError{Category: domain.ErrHTTPStatus, Status: 500}
	if _, err := db.RecordDelivery(ctx, ds[0], fail, 500, time.Second, 0); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale holder recorded: %v", err)
	}
	if err := db.ReleaseDelivery(ctx, ds[0]); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale holder released: %v", err)
	}
	hooks, _ := db.Webhooks(ctx, c.ID)
	if hooks[0].ConsecutiveFailures != 0 {
		t.Fatalf("a stale outcome counted: %+v", hooks[0])
	}
	if _, err := db.RecordDelivery(ctx, taken[0], fail, 500, time.Second, 0); err != nil {
		t.Fatal(err)
	}
	hooks, _ = db.Webhooks(ctx, c.ID)
	if hooks[0].ConsecutiveFailures != 1 || hooks[0].LastError != fail || hooks[0].LastErrorAt == nil {
		t.Fatalf("after one failure: %+v", hooks[0])
	}
	// In order: the failed head comes back before the second event.
	next := claim()
	if len(next) != 1 || next[0].EventID != first || next[0].Attempt != 3 {
		t.Fatalf("after the failure: %+v, want event %d again", next, first)
	}
	if _, err := db.RecordDelivery(ctx, next[0], domain.DeliveryError{}, 200, time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	last := claim()
	if len(last) != 1 || last[0].EventID != second {
		t.Fatalf("then: %+v, want event %d", last, second)
	}
	if err := db.ReleaseDelivery(ctx, last[0]); err != nil {
		t.Fatal(err)
	}
	if st, attempts, _ := db.WebhookDeliveryStatus(ctx, second, hook.ID); st != "pending" || attempts != 0 {
		t.Errorf("a released delivery: %s after %d attempts, want pending after 0", st, attempts)
	}
	hooks, _ = db.Webhooks(ctx, c.ID)
	if hooks[0].ConsecutiveFailures != 0 || hooks[0].LastSuccessAt == nil {
		t.Errorf("after a success: %+v", hooks[0])
	}
	log, err := db.WebhookDeliveries(ctx, c.ID, hook.ID, 10)
	if err != nil || len(log) != 2 || log[0].EventID != second || log[1].Status != domain.DeliveryDelivered || log[1].Attempts != 3 ||
		log[1].ResponseStatus == nil || *log[1].ResponseStatus != 200 {
		t.Errorf("delivery log: %+v, %v", log, err)
	}
}

// An event whose transaction commits after a later event was fanned out is
// still fanned out (a cursor over ids would skip it).
func TestFanOutLateCommit(t *testing.T) {
	t.Parallel()
	db, box, c := hookFixture(t)
	ctx := context.Background()
	if _, _, err := db.CreateWebhook(ctx, box, c.ID, "https://hooks.example.com/a", nil); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	var early int64
	if err := tx.QueryRow(ctx, `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
		VALUES ('crypto', 'SOL_USDT', 'neutral', 'growth', 30, now()) RETURNING id`).Scan(&early); err != nil {
		t.Fatal(err)
	}
	later := verdictEvent(t, db, "BTC_USDT")
	if n, err := db.FanOut(ctx, 100); err != nil || n != 1 {
		t.Fatalf("FanOut = %d, %v", n, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := db.FanOut(ctx, 100); err != nil || n != 1 {
		t.Fatalf("FanOut after the late commit = %d, %v", n, err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE event_id IN ($1, $2)`, early, later).Scan(&n); err != nil || n != 2 {
		t.Errorf("%d deliveries, want 2 (%v)", n, err)
	}
}

// Clients act on their own subscriptions only: another client's id is not
// found; rotation keeps the previous secret for a day; redelivery queues a
// delivery again only while the subscription is active.
func TestWebhookSelfService(t *testing.T) {
	t.Parallel()
	db, box, c := hookFixture(t)
	other := newClient(t, db, nil)
	ctx := context.Background()
	hook, secret, err := db.CreateWebhook(ctx, box, c.ID, "https://hooks.example.com/a", nil)
	if err != nil {
		t.Fatal(err)
	}
	notFound := func(err error) bool { return domain.ErrorCode(err) == domain.ENOTFOUND }
	if _, err := db.EnableWebhook(ctx, other.ID, hook.ID); !notFound(err) {
		t.Errorf("another client's enable: %v", err)
	}
	if _, _, err := db.RotateWebhookSecret(ctx, box, other.ID, hook.ID); !notFound(err) {
		t.Errorf("another client's rotation: %v", err)
	}
	if _, err := db.WebhookTarget(ctx, box, other.ID, hook.ID); !notFound(err) {
		t.Errorf("another client's target: %v", err)
	}
	if _, err := db.WebhookDeliveries(ctx, other.ID, hook.ID, 10); !notFound(err) {
		t.Errorf("another client's deliveries: %v", err)
	}
	_, rotated, err := db.RotateWebhookSecret(ctx, box, c.ID, hook.ID)
	if err != nil || rotated == secret {
		t.Fatalf("rotate: %v", err)
	}
	target, err := db.WebhookTarget(ctx, box, c.ID, hook.ID)
	if err != nil || target.Secret != rotated || target.PreviousSecret != secret || target.Webhook.PreviousSecretUntil == nil ||
		time.Until(*target.Webhook.PreviousSecretUntil) < 23*time.Hour {
		t.Fatalf("after rotation: %+v, %v", target.Webhook, err)
	}
	ev := verdictEvent(t, db, "BTC_USDT")
	if _, err := db.FanOut(ctx, 10); err != nil {
		t.Fatal(err)
	}
	log, _ := db.WebhookDeliveries(ctx, c.ID, hook.ID, 10)
	if len(log) != 1 || log[0].EventID != ev {
		t.Fatalf("log %+v", log)
	}
	if _, err := db.Redeliver(ctx, other.ID, hook.ID, log[0].ID); !notFound(err) {
		t.Errorf("another client's redelivery: %v", err)
	}
	if _, err := db.Pool.Exec(ctx, `UPDATE webhooks SET status = 'disabled'`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Redeliver(ctx, c.ID, hook.ID, log[0].ID); domain.ErrorCode(err) != domain.ECONFLICT {
		t.Errorf("redeliver on a disabled subscription: %v", err)
	}
	if w, err := db.EnableWebhook(ctx, c.ID, hook.ID); err != nil || w.Status != domain.WebhookActive {
		t.Fatalf("enable: %+v %v", w, err)
	}
	d, err := db.Redeliver(ctx, c.ID, hook.ID, log[0].ID)
	if err != nil || d.Status != domain.DeliveryPending || d.NextAttemptAt == nil {
		t.Errorf("redeliver: %+v %v", d, err)
	}
	if _, err := db.Redeliver(ctx, c.ID, hook.ID, log[0].ID+1000); !notFound(err) {
		t.Errorf("unknown delivery: %v", err)
	}
}

// A redelivery never leaves a pending delivery on a disabled subscription,
// nor one whose market the client's tier no longer covers, even when the
// disabling outcome (the 10th failure in a row) or the downgrade commits
// between Redeliver's checks and its update: both race it here, many
// times over.
func TestRedeliverRacesDisableAndDowngrade(t *testing.T) {
	t.Parallel()
	db, box, _ := hookFixture(t)
	ctx := context.Background()
	// setup is a fresh client with one subscription, a delivered event
	// (the one to redeliver, crypto) and a claimed one (the 10th failure
	// to be), the subscription 9 failures in.
	setup := func() (clientID, hookID string, delivered int64) {
		t.Helper()
		c := newClient(t, db, nil)
		hook, _, err := db.CreateWebhook(ctx, box, c.ID, "https://hooks.example.com/a", nil)
		if err != nil {
			t.Fatal(err)
		}
		first := verdictEvent(t, db, "BTC_USDT")
		if _, err := db.FanOut(ctx, 100); err != nil {
			t.Fatal(err)
		}
		if err := db.Pool.QueryRow(ctx, `UPDATE webhook_deliveries SET status = 'delivered', delivered_at = now()
			WHERE webhook_id = $1 AND event_id = $2 RETURNING id`, hook.ID, first).Scan(&delivered); err != nil {
			t.Fatal(err)
		}
		return c.ID, hook.ID, delivered
	}
	// pending lists the subscription's pending deliveries and whether it
	// may still receive them: active, and their market in the tier.
	check := func(what, clientID, hookID string) {
		t.Helper()
		var bad int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
			JOIN clients c ON c.id = w.client_id JOIN verdict_events e ON e.id = d.event_id
			WHERE d.webhook_id = $1 AND d.status = 'pending' AND (w.status <> 'active' OR NOT e.market = ANY (c.markets))`,
			hookID).Scan(&bad); err != nil {
			t.Fatal(err)
		}
		if bad > 0 {
			t.Fatalf("%s: %d pending deliveries the subscription may not receive", what, bad)
		}
	}
	race := func(a, b func()) {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, f := range []func(){a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				f()
			}()
		}
		close(start)
		wg.Wait()
	}
	const rounds = 40
	for range rounds {
		clientID, hookID, delivered := setup()
		verdictEvent(t, db, "ETH_USDT")
		if _, err := db.FanOut(ctx, 100); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Pool.Exec(ctx, `UPDATE webhooks SET consecutive_failures = $2 WHERE id = $1`,
			hookID, domain.WebhookFailureLimit-1); err != nil {
			t.Fatal(err)
		}
		claimed, err := db.ClaimDeliveries(ctx, box, 10, time.Minute)
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim: %+v %v", claimed, err)
		}
		race(func() {
			_, _ = db.Redeliver(ctx, clientID, hookID, delivered) // either outcome; the state is checked
		}, func() {
			fail := domain.DeliveryError{Category: domain.ErrHTTPStatus, Status: 500}
			if disabled, err := db.RecordDelivery(ctx, claimed[0], fail, 500, time.Millisecond, time.Minute); err != nil || !disabled {
				t.Errorf("the 10th failure: disabled %v, %v", disabled, err)
			}
		})
		check("redelivery against the 10th failure", clientID, hookID)
	}
	for range rounds {
		clientID, hookID, delivered := setup()
		race(func() {
			_, _ = db.Redeliver(ctx, clientID, hookID, delivered)
		}, func() {
			if _, err := db.SetClientTier(ctx, clientID, domain.Starter, []domain.Market{domain.Forex}); err != nil {
				t.Error(err)
			}
			if _, err := db.DropIneligible(ctx); err != nil {
				t.Error(err)
			}
		})
		check("redelivery against a downgrade", clientID, hookID)
	}
}
