package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/webhook"
	"github.com/marketscreener/market/worker"
)

// hit is one request a receiver got.
type hit struct {
	path   string
	header http.Header
	body   []byte
}

// receiver is a TLS webhook endpoint on loopback that records what it gets
// and answers status (after delay), per path.
type receiver struct {
	srv *httptest.Server
	mu  sync.Mutex
	// status answers the n-th request (from 0); 200 when nil.
	status   func(n int) int
	delay    time.Duration
	slowPath string // answers only after 12 s (past the time-out) on this path
	hits     []hit
	inflight map[string]int
	maxIn    map[string]int
}

func newReceiver(t *testing.T, delay time.Duration, status func(n int) int) *receiver {
	return newPathReceiver(t, delay, "", status)
}

func newPathReceiver(t *testing.T, delay time.Duration, slowPath string, status func(n int) int) *receiver {
	r := &receiver{status: status, delay: delay, slowPath: slowPath, inflight: map[string]int{}, maxIn: map[string]int{}}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		n := len(r.hits)
		r.hits = append(r.hits, hit{path: req.URL.Path, header: req.Header.Clone(), body: b})
		r.inflight[req.URL.Path]++
		r.maxIn[req.URL.Path] = max(r.maxIn[req.URL.Path], r.inflight[req.URL.Path])
		st := http.StatusOK
		if r.status != nil {
			st = r.status(n)
		}
		r.mu.Unlock()
		if r.delay > 0 {
			time.Sleep(r.delay)
		}
		if r.slowPath != "" && req.URL.Path == r.slowPath {
			select {
			case <-time.After(12 * time.Second):
			case <-req.Context().Done():
			}
		}
		r.mu.Lock()
		r.inflight[req.URL.Path]--
		r.mu.Unlock()
		if st == http.StatusFound {
			w.Header().Set("Location", "https://example.com/")
		}
		w.WriteHeader(st)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) got() []hit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hit(nil), r.hits...)
}

func (r *receiver) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
}

// logBuffer collects a dispatcher's JSON log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type webhookFixture struct {
	db   *store.DB
	box  *domain.SecretBox
	disp *worker.Dispatcher
	logs *logBuffer
}

func newWebhookFixture(t *testing.T, r *receiver, allowPrivate bool) *webhookFixture {
	t.Helper()
	db := storetest.New(t)
	box, err := domain.NewSecretBox(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	f := &webhookFixture{db: db, box: box, logs: &logBuffer{}}
	f.disp = f.dispatcher(r, allowPrivate)
	return f
}

// dispatcher is one worker's dispatcher on the fixture's database.
func (f *webhookFixture) dispatcher(r *receiver, allowPrivate bool) *worker.Dispatcher {
	client := webhook.NewClient(webhook.ClientConfig{AllowPrivate: allowPrivate, ExtraRootsPEM: r.caPEM()})
	return &worker.Dispatcher{Store: f.db, Box: f.box, Client: client, Now: time.Now, Backoff: func(int) time.Duration { return 0 },
		Logger: slog.New(slog.NewJSONHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
}

func (f *webhookFixture) client(t *testing.T, markets ...domain.Market) *domain.Client {
	t.Helper()
	tier := domain.Business
	if len(markets) == 1 {
		tier = domain.Starter
	}
	c := &domain.Client{OrgName: "Hooked", Tier: tier, Markets: markets}
	if err := f.db.CreateClient(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c
}

func (f *webhookFixture) subscribe(t *testing.T, clientID, url string, market *domain.Market) (domain.Webhook, string) {
	t.Helper()
	w, secret, err := f.db.CreateWebhook(context.Background(), f.box, clientID, url, market)
	if err != nil {
		t.Fatal(err)
	}
	return w, secret
}

func (f *webhookFixture) event(t *testing.T, m domain.Market, symbol string) int64 {
	t.Helper()
	var id int64
	err := f.db.Pool.QueryRow(context.Background(), `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
		VALUES ($1, $2, 'neutral', 'growth', 42, $3) RETURNING id`, string(m), symbol, time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (f *webhookFixture) dispatch(t *testing.T) {
	t.Helper()
	if _, err := f.disp.Dispatch(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (f *webhookFixture) hook(t *testing.T, clientID string) domain.Webhook {
	t.Helper()
	hooks, err := f.db.Webhooks(context.Background(), clientID)
	if err != nil || len(hooks) == 0 {
		t.Fatalf("webhooks of %s: %v", clientID, err)
	}
	return hooks[0]
}

func ptr[T any](v T) *T { return &v }

// A verdict change reaches every matching subscription once, with the
// contract's signature and the Standard Webhooks headers that the
// Standard Webhooks library verifies; the body carries the event id;
// another market's subscription gets nothing; dispatching again sends
// nothing more.
func TestWebhookDelivered(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, 0, func(int) int { return http.StatusNoContent })
	f := newWebhookFixture(t, r, true)
	ctx := context.Background()
	all := f.client(t, domain.Markets...)
	hook, secret := f.subscribe(t, all.ID, r.srv.URL+"/hook?token=abc", nil)
	f.subscribe(t, f.client(t, domain.Forex).ID, r.srv.URL+"/forex", ptr(domain.Forex))
	id := f.event(t, domain.Crypto, "BTC_USDT")
	f.dispatch(t)
	f.dispatch(t)
	hits := r.got()
	if len(hits) != 1 {
		t.Fatalf("receiver got %d requests, want exactly 1", len(hits))
	}
	h, body := hits[0].header, hits[0].body
	if hits[0].path != "/hook" || h.Get("Content-Type") != "application/json" {
		t.Errorf("request %s %s", hits[0].path, h.Get("Content-Type"))
	}
	if got, want := h.Get("X-Webhook-Signature"), domain.SignWebhook(secret, body); got != want {
		t.Errorf("X-Webhook-Signature %q, want %q", got, want)
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatalf("the Standard Webhooks library refuses our secret: %v", err)
	}
	if err := wh.Verify(body, h); err != nil {
		t.Errorf("Standard Webhooks verification: %v (headers %v)", err, h)
	}
	eid := strconv.FormatInt(id, 10)
	if h.Get("X-Webhook-Id") != eid || h.Get("webhook-id") != eid || h.Get("X-Webhook-Timestamp") != h.Get("webhook-timestamp") {
		t.Errorf("headers %v", h)
	}
	var p webhook.VerdictChanged
	if err := json.Unmarshal(body, &p); err != nil || p != (webhook.VerdictChanged{ID: eid, Event: "verdict_changed", Market: "crypto",
		Symbol: "BTC_USDT", OldVerdict: "neutral", NewVerdict: "growth", OverallScore: 42, Timestamp: "2026-11-22T08:00:00Z", ModelVersion: "v1"}) {
		t.Errorf("payload %s (%v)", body, err)
	}
	if st, attempts, err := f.db.WebhookDeliveryStatus(ctx, id, hook.ID); err != nil || st != "delivered" || attempts != 1 {
		t.Errorf("delivery %s after %d attempts, %v", st, attempts, err)
	}
	if w := f.hook(t, all.ID); w.LastSuccessAt == nil || w.ConsecutiveFailures != 0 || !w.LastError.OK() {
		t.Errorf("subscription after a success: %+v", w)
	}
}

// A captured delivery replayed later is refused by a receiver that uses
// the Standard Webhooks library: the timestamp is signed, and older than
// 5 minutes is too old. Changing the timestamp breaks the signature.
func TestWebhookReplayWindow(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, 0, nil)
	f := newWebhookFixture(t, r, true)
	_, secret := f.subscribe(t, f.client(t, domain.Markets...).ID, r.srv.URL+"/hook", nil)
	f.disp.Now = func() time.Time { return time.Now().Add(-6 * time.Minute) } // the capture was made 6 minutes ago
	f.event(t, domain.Crypto, "BTC_USDT")
	f.dispatch(t)
	hits := r.got()
	if len(hits) != 1 {
		t.Fatalf("%d requests", len(hits))
	}
	wh, _ := standardwebhooks.NewWebhook(secret)
	if err := wh.VerifyIgnoringTimestamp(hits[0].body, hits[0].header); err != nil {
		t.Fatalf("the capture's signature: %v", err)
	}
	if err := wh.Verify(hits[0].body, hits[0].header); err == nil {
		t.Error("a delivery signed 6 minutes ago was accepted: replays are possible")
	}
	fresh := hits[0].header.Clone()
	fresh.Set("webhook-timestamp", strconv.FormatInt(time.Now().Unix(), 10))
	if err := wh.Verify(hits[0].body, fresh); err == nil {
		t.Error("a replay with a fresh timestamp verified: the timestamp is not signed")
	}
}

// After a rotation, deliveries carry signatures with both secrets (either
// verifies) and X-Webhook-Signature uses the new one.
func TestWebhookSecretRotation(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, 0, nil)
	f := newWebhookFixture(t, r, true)
	c := f.client(t, domain.Markets...)
	hook, old := f.subscribe(t, c.ID, r.srv.URL+"/hook", nil)
	_, rotated, err := f.db.RotateWebhookSecret(context.Background(), f.box, c.ID, hook.ID)
	if err != nil {
		t.Fatal(err)
	}
	f.event(t, domain.Crypto, "BTC_USDT")
	f.dispatch(t)
	hits := r.got()
	if len(hits) != 1 {
		t.Fatalf("%d requests", len(hits))
	}
	for _, s := range []string{old, rotated} {
		wh, _ := standardwebhooks.NewWebhook(s)
		if err := wh.Verify(hits[0].body, hits[0].header); err != nil {
			t.Errorf("secret %s…: %v", s[:10], err)
		}
	}
	if hits[0].header.Get("X-Webhook-Signature") != domain.SignWebhook(rotated, hits[0].body) {
		t.Error("X-Webhook-Signature is not made with the new secret")
	}
}

// Failed attempts count one each: a success in between resets the count;
// with the receiver down, the 10th consecutive failure disables the
// subscription (exactly 10 attempts, logged once) and drops what is
// pending; new events no longer reach it. Logs name the host, never the
// URL's path or query.
func TestWebhookDisabledAfterTenFailures(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, 0, func(n int) int {
		if n < 3 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	f := newWebhookFixture(t, r, true)
	ctx := context.Background()
	c := f.client(t, domain.Markets...)
	hook, _ := f.subscribe(t, c.ID, r.srv.URL+"/hook/tok-path?token=abc", nil)
	first := f.event(t, domain.Crypto, "BTC_USDT")
	f.dispatch(t) // three failures, then the 4th attempt succeeds
	if w := f.hook(t, c.ID); w.ConsecutiveFailures != 0 || w.Status != domain.WebhookActive || w.LastSuccessAt == nil ||
		w.LastError != (domain.DeliveryError{Category: domain.ErrHTTPStatus, Status: 500}) {
		t.Fatalf("after 3 failures and a success: %+v", w)
	}
	if st, attempts, _ := f.db.WebhookDeliveryStatus(ctx, first, hook.ID); st != "delivered" || attempts != 4 {
		t.Fatalf("first event %s after %d attempts, want delivered after 4", st, attempts)
	}
	r.srv.Close() // the receiver goes down
	second := f.event(t, domain.Crypto, "ETH_USDT")
	third := f.event(t, domain.Crypto, "SOL_USDT")
	f.dispatch(t)
	w := f.hook(t, c.ID)
	if w.Status != domain.WebhookDisabled || w.ConsecutiveFailures != 10 || w.LastError.Category != domain.ErrConnect {
		t.Fatalf("after the receiver went down: %+v", w)
	}
	// In order: the second event took all 10 attempts, the third none.
	if st, attempts, _ := f.db.WebhookDeliveryStatus(ctx, second, hook.ID); st != "dropped" || attempts != 10 {
		t.Errorf("second event: %s after %d attempts, want dropped after 10", st, attempts)
	}
	if st, attempts, _ := f.db.WebhookDeliveryStatus(ctx, third, hook.ID); st != "dropped" || attempts != 0 {
		t.Errorf("third event: %s after %d attempts, want dropped after 0", st, attempts)
	}
	f.event(t, domain.Crypto, "ADA_USDT")
	f.dispatch(t)
	if log, _ := f.db.WebhookDeliveries(ctx, c.ID, hook.ID, 10); len(log) != 3 {
		t.Errorf("a disabled subscription got a new delivery: %d in its log", len(log))
	}
	logs := f.logs.String()
	if n := strings.Count(logs, "disabled after consecutive failures"); n != 1 {
		t.Errorf("disabling logged %d times, want once:\n%s", n, logs)
	}
	if strings.Contains(logs, "tok-path") || strings.Contains(logs, "token=abc") || !strings.Contains(logs, hook.ID) ||
		!strings.Contains(logs, r.srv.Listener.Addr().String()) {
		t.Errorf("logs must name the subscription and host, never the path or query:\n%s", logs)
	}
	// Re-enabled, it gets new events again.
	if _, err := f.db.EnableWebhook(ctx, c.ID, hook.ID); err != nil {
		t.Fatal(err)
	}
	f.event(t, domain.Crypto, "XRP_USDT")
	f.disp.Backoff = worker.RetryBackoff
	f.dispatch(t)
	if w := f.hook(t, c.ID); w.Status != domain.WebhookActive || w.ConsecutiveFailures != 1 {
		t.Errorf("after enable and one more failure: %+v", w)
	}
}

// Receivers that take 7 s (under the 10 s time-out), 100 pending
// deliveries over 10 subscriptions of two clients, two workers and a
// wake-up every second: every event reaches every subscription exactly
// once, in order, never two at a time to one subscription.
func TestWebhookSlowReceiversExactlyOnce(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, 7*time.Second, nil)
	f := newWebhookFixture(t, r, true)
	ctx := context.Background()
	var hooks []domain.Webhook
	clients := []*domain.Client{f.client(t, domain.Markets...), f.client(t, domain.Crypto, domain.Forex)}
	for i := range 10 {
		h, _ := f.subscribe(t, clients[i%2].ID, fmt.Sprintf("%s/s%d", r.srv.URL, i), nil)
		hooks = append(hooks, h)
	}
	var events []int64
	for i := range 10 {
		events = append(events, f.event(t, domain.Crypto, fmt.Sprintf("C%d_USDT", i)))
	}
	workers := []*worker.Dispatcher{f.disp, f.dispatcher(r, true)}
	for _, d := range workers {
		d.Backoff = worker.RetryBackoff
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, d := range workers {
		wg.Go(func() {
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for runCtx.Err() == nil {
				// A wake-up while a pass runs returns at once.
				wg.Go(func() { _, _ = d.Dispatch(runCtx) })
				select {
				case <-runCtx.Done():
				case <-tick.C:
				}
			}
		})
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var delivered int
		if err := f.db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'`).Scan(&delivered); err != nil {
			t.Fatal(err)
		}
		if delivered == 100 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	stop()
	wg.Wait()
	hits := r.got()
	perPath := map[string][]string{}
	for _, h := range hits {
		var p webhook.VerdictChanged
		if err := json.Unmarshal(h.body, &p); err != nil {
			t.Fatal(err)
		}
		perPath[h.path] = append(perPath[h.path], p.ID)
	}
	if len(hits) != 100 {
		t.Errorf("%d requests for 100 deliveries", len(hits))
	}
	for i := range hooks {
		path := fmt.Sprintf("/s%d", i)
		got := perPath[path]
		want := make([]string, len(events))
		for j, e := range events {
			want[j] = strconv.FormatInt(e, 10)
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s got events %v, want each once in order %v", path, got, want)
		}
		if m := r.maxIn[path]; m != 1 {
			t.Errorf("%s had %d deliveries in flight at once, want 1", path, m)
		}
	}
	var maxAttempts, failures int
	if err := f.db.Pool.QueryRow(ctx, `SELECT (SELECT max(attempts) FROM webhook_deliveries), (SELECT sum(consecutive_failures) FROM webhooks)`).
		Scan(&maxAttempts, &failures); err != nil || maxAttempts != 1 || failures != 0 {
		t.Errorf("max attempts %d, failures %d (%v): want 1 and 0", maxAttempts, failures, err)
	}
}

// A hanging receiver slows only its own subscription: another client's
// fast receiver gets all its events while the hanging one's first is still
// in flight; the hanging one's attempt ends at the time-out as a timeout.
func TestWebhookHangingReceiverDelaysOnlyItself(t *testing.T) {
	t.Parallel()
	r := newPathReceiver(t, 0, "/hang", nil)
	f := newWebhookFixture(t, r, true)
	ctx := context.Background()
	slow, fast := f.client(t, domain.Markets...), f.client(t, domain.Markets...)
	f.subscribe(t, slow.ID, r.srv.URL+"/hang", nil)
	fastHook, _ := f.subscribe(t, fast.ID, r.srv.URL+"/fast", nil)
	for i := range 3 {
		f.event(t, domain.Crypto, fmt.Sprintf("H%d_USDT", i))
	}
	f.disp.Backoff = worker.RetryBackoff
	done := make(chan error, 1)
	go func() { _, err := f.disp.Dispatch(ctx); done <- err }()
	for {
		log, err := f.db.WebhookDeliveries(ctx, fast.ID, fastHook.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		delivered := 0
		for _, d := range log {
			if d.Status == domain.DeliveryDelivered {
				delivered++
			}
		}
		if delivered == 3 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.mu.Lock()
	hanging := r.inflight["/hang"]
	r.mu.Unlock()
	if hanging != 1 {
		t.Errorf("when the fast receiver had all 3 events, the hanging one had %d in flight, want 1 (still waiting)", hanging)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w := f.hook(t, slow.ID); w.ConsecutiveFailures != 1 || w.LastError.Category != domain.ErrTimeout {
		t.Errorf("the hanging subscription: %+v, want one timeout", w)
	}
}

// The tier is checked at fan-out and again at send: after a downgrade
// that removes crypto, pending crypto deliveries are dropped
// (market_not_in_tier), new crypto events are not fanned out, the other
// market still flows.
func TestWebhookTierDowngrade(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, 0, nil)
	f := newWebhookFixture(t, r, true)
	ctx := context.Background()
	c := f.client(t, domain.Crypto, domain.Forex)
	cryptoHook, _ := f.subscribe(t, c.ID, r.srv.URL+"/crypto", ptr(domain.Crypto))
	allHook, _ := f.subscribe(t, c.ID, r.srv.URL+"/all", nil)
	f.event(t, domain.Crypto, "BTC_USDT")
	f.dispatch(t)
	pending := f.event(t, domain.Crypto, "ETH_USDT")
	forex := f.event(t, domain.Forex, "EUR_USD")
	if _, err := f.db.FanOut(ctx, 10); err != nil { // fanned out before the downgrade
		t.Fatal(err)
	}
	if _, err := f.db.SetClientTier(ctx, c.ID, domain.Starter, []domain.Market{domain.Forex}); err != nil {
		t.Fatal(err)
	}
	f.dispatch(t)
	f.event(t, domain.Crypto, "SOL_USDT")
	f.dispatch(t)
	var paths []string
	for _, h := range r.got() {
		paths = append(paths, h.path)
	}
	if strings.Join(paths, " ") != "/crypto /all /all" && strings.Join(paths, " ") != "/all /crypto /all" {
		t.Errorf("requests %v, want the first crypto event twice and the forex event once", paths)
	}
	for _, h := range []domain.Webhook{cryptoHook, allHook} {
		if st, attempts, _ := f.db.WebhookDeliveryStatus(ctx, pending, h.ID); st != "dropped" || attempts != 0 {
			t.Errorf("pending crypto delivery: %s after %d attempts, want dropped unsent", st, attempts)
		}
	}
	log, _ := f.db.WebhookDeliveries(ctx, c.ID, allHook.ID, 10)
	if len(log) != 3 || log[0].EventID != forex || log[0].Status != "delivered" || log[1].DropReason != domain.DropMarketNotInTier {
		t.Errorf("log of the all-markets subscription: %+v", log)
	}
}

// A suspended client, or one whose contract ended, gets nothing more: what
// was pending is dropped (client_inactive) and new events are not fanned
// out. Reactivated, it gets new events again.
func TestWebhookInactiveClient(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, 0, nil)
	f := newWebhookFixture(t, r, true)
	ctx := context.Background()
	suspended, expired := f.client(t, domain.Markets...), f.client(t, domain.Markets...)
	sHook, _ := f.subscribe(t, suspended.ID, r.srv.URL+"/suspended", nil)
	eHook, _ := f.subscribe(t, expired.ID, r.srv.URL+"/expired", nil)
	ev := f.event(t, domain.Crypto, "BTC_USDT")
	if _, err := f.db.FanOut(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.SetClientStatus(ctx, suspended.ID, domain.StatusSuspended); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.SetClientLimits(ctx, expired.ID, nil, nil, false, ptr(time.Now().Add(-time.Minute))); err != nil {
		t.Fatal(err)
	}
	f.dispatch(t)
	f.event(t, domain.Crypto, "ETH_USDT")
	f.dispatch(t)
	if n := len(r.got()); n != 0 {
		t.Fatalf("inactive clients got %d requests", n)
	}
	for _, h := range []domain.Webhook{sHook, eHook} {
		log, _ := f.db.WebhookDeliveries(ctx, h.ClientID, h.ID, 10)
		if len(log) != 1 || log[0].EventID != ev || log[0].Status != "dropped" || log[0].DropReason != domain.DropClientInactive {
			t.Errorf("log of %s: %+v", h.CallbackURL, log)
		}
	}
	if _, err := f.db.SetClientStatus(ctx, suspended.ID, domain.StatusActive); err != nil {
		t.Fatal(err)
	}
	f.event(t, domain.Crypto, "SOL_USDT")
	f.dispatch(t)
	if hits := r.got(); len(hits) != 1 || hits[0].path != "/suspended" {
		t.Errorf("after reactivation: %v", hits)
	}
}

// A subscription whose secret will not open fails alone: it is disabled
// with an operator log line, the others are delivered, the pass succeeds.
func TestWebhookBadSecretFailsAlone(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, 0, nil)
	f := newWebhookFixture(t, r, true)
	ctx := context.Background()
	c := f.client(t, domain.Markets...)
	bad, _ := f.subscribe(t, c.ID, r.srv.URL+"/bad", nil)
	f.subscribe(t, c.ID, r.srv.URL+"/good", nil)
	if _, err := f.db.Pool.Exec(ctx, `UPDATE webhooks SET secret_sealed = 'not a sealed secret' WHERE id = $1`, bad.ID); err != nil {
		t.Fatal(err)
	}
	f.event(t, domain.Crypto, "BTC_USDT")
	f.event(t, domain.Crypto, "ETH_USDT")
	f.dispatch(t)
	if hits := r.got(); len(hits) != 2 || hits[0].path != "/good" || hits[1].path != "/good" {
		t.Errorf("requests %v, want both events at /good only", hits)
	}
	hooks, _ := f.db.Webhooks(ctx, c.ID)
	for _, h := range hooks {
		if h.ID == bad.ID && (h.Status != domain.WebhookDisabled || h.LastError.Category != domain.ErrInternal || h.ConsecutiveFailures != 0) {
			t.Errorf("the subscription with a bad secret: %+v", h)
		}
	}
	if logs := f.logs.String(); !strings.Contains(logs, "does not open with MARKET_SECRET_KEY") || !strings.Contains(logs, bad.ID) {
		t.Errorf("no operator log line naming %s:\n%s", bad.ID, logs)
	}
}

// Without the test opt-in, a callback that resolves to a loopback address
// is refused at dial time (and counted as a failure), never connected to;
// the client sees the category, not the address.
func TestWebhookRefusesInternalAddress(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, 0, nil)
	f := newWebhookFixture(t, r, false)
	c := f.client(t, domain.Markets...)
	f.subscribe(t, c.ID, r.srv.URL+"/hook", nil)
	f.event(t, domain.Crypto, "BTC_USDT")
	f.disp.Backoff = worker.RetryBackoff
	f.dispatch(t)
	if len(r.got()) != 0 {
		t.Fatalf("the receiver on 127.0.0.1 was reached")
	}
	if w := f.hook(t, c.ID); w.ConsecutiveFailures != 1 || w.LastError != (domain.DeliveryError{Category: domain.ErrAddressRefused}) {
		t.Errorf("after a refused dial: %+v", w)
	}
}
