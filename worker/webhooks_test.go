package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/worker"
)

// receiver is a TLS webhook endpoint that records what it gets.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []*http.Request
	bodies [][]byte
	status int
}

func newReceiver(t *testing.T, status int) *receiver {
	r := &receiver{status: status}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, req)
		r.bodies = append(r.bodies, b)
		st := r.status
		r.mu.Unlock()
		if st == http.StatusFound {
			w.Header().Set("Location", "https://example.com/")
		}
		w.WriteHeader(st)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func (r *receiver) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
}

type webhookFixture struct {
	db   *store.DB
	box  *domain.SecretBox
	disp *worker.Dispatcher
}

func newWebhookFixture(t *testing.T, r *receiver, allowPrivate bool) *webhookFixture {
	t.Helper()
	db := storetest.New(t)
	box, err := domain.NewSecretBox(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	client := worker.NewWebhookClient(worker.WebhookClientConfig{AllowPrivate: allowPrivate, ExtraRootsPEM: r.caPEM()})
	return &webhookFixture{db: db, box: box, disp: &worker.Dispatcher{Store: db, Box: box, Client: client, Logger: discard(),
		Now: time.Now, Backoff: func(int) time.Duration { return 0 }}}
}

func (f *webhookFixture) client(t *testing.T, markets ...domain.Market) string {
	t.Helper()
	tier := domain.Business
	if len(markets) == 1 {
		tier = domain.Starter
	}
	c := &domain.Client{OrgName: "Hooked", Tier: tier, Markets: markets}
	if err := f.db.CreateClient(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	return c.ID
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

// A verdict change reaches every matching subscription once, signed with
// its secret; another market's subscription gets nothing; dispatching
// again sends nothing more.
func TestWebhookDelivered(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, http.StatusNoContent)
	f := newWebhookFixture(t, r, true)
	ctx := context.Background()
	all := f.client(t, domain.Markets...)
	hook, secret, err := f.db.CreateWebhook(ctx, f.box, all, r.srv.URL+"/hook?token=abc", nil)
	if err != nil {
		t.Fatal(err)
	}
	forex := domain.Forex
	if _, _, err := f.db.CreateWebhook(ctx, f.box, f.client(t, domain.Forex), r.srv.URL+"/forex", &forex); err != nil {
		t.Fatal(err)
	}
	id := f.event(t, domain.Crypto, "BTC_USDT")
	f.dispatch(t)
	f.dispatch(t)
	if r.count() != 1 {
		t.Fatalf("receiver got %d requests, want exactly 1", r.count())
	}
	req, body := r.got[0], r.bodies[0]
	if req.URL.Path != "/hook" || req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
		t.Errorf("request %s %s %s", req.Method, req.URL, req.Header.Get("Content-Type"))
	}
	if got, want := req.Header.Get("X-Webhook-Signature"), domain.SignWebhook(secret, body); got != want {
		t.Errorf("signature %q, want %q", got, want)
	}
	if req.Header.Get("X-Webhook-Id") != strconv.FormatInt(id, 10) || req.Header.Get("X-Webhook-Timestamp") == "" {
		t.Errorf("headers %v", req.Header)
	}
	var p worker.WebhookPayload
	if err := json.Unmarshal(body, &p); err != nil || p != (worker.WebhookPayload{Event: "verdict_changed", Market: "crypto", Symbol: "BTC_USDT",
		OldVerdict: "neutral", NewVerdict: "growth", OverallScore: 42, Timestamp: "2026-11-22T08:00:00Z"}) {
		t.Errorf("payload %s (%v)", body, err)
	}
	if st, attempts, err := f.db.WebhookDeliveryStatus(ctx, id, hook.ID); err != nil || st != "delivered" || attempts != 1 {
		t.Errorf("delivery %s after %d attempts, %v", st, attempts, err)
	}
}

// Ten failed deliveries in a row disable the subscription and drop what
// is pending; a success in between resets the count.
func TestWebhookDisabledAfterTenFailures(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, http.StatusInternalServerError)
	f := newWebhookFixture(t, r, true)
	ctx := context.Background()
	hook, _, err := f.db.CreateWebhook(ctx, f.box, f.client(t, domain.Markets...), r.srv.URL+"/hook", nil)
	if err != nil {
		t.Fatal(err)
	}
	first := f.event(t, domain.Crypto, "BTC_USDT")
	for range 3 {
		f.dispatch(t)
	}
	r.mu.Lock()
	r.status = http.StatusOK
	r.mu.Unlock()
	f.dispatch(t) // the 4th attempt succeeds
	hooks, _ := f.db.Webhooks(ctx, hook.ClientID)
	if hooks[0].ConsecutiveFailures != 0 || hooks[0].Status != domain.WebhookActive {
		t.Fatalf("after a success: %+v", hooks[0])
	}
	r.mu.Lock()
	r.status = http.StatusFound // a redirect is a failure, not followed
	r.mu.Unlock()
	second := f.event(t, domain.Crypto, "ETH_USDT")
	third := f.event(t, domain.Crypto, "SOL_USDT")
	before := r.count()
	for range 10 {
		f.dispatch(t)
	}
	hooks, _ = f.db.Webhooks(ctx, hook.ClientID)
	if hooks[0].Status != domain.WebhookDisabled || hooks[0].ConsecutiveFailures != 10 || hooks[0].LastError == "" {
		t.Fatalf("after 10 failures: %+v", hooks[0])
	}
	// Two pending deliveries: each dispatch tries both, so the 10th failure
	// comes after 5 dispatches; nothing is sent after that.
	if sent := r.count() - before; sent != 10 {
		t.Errorf("%d attempts before the subscription was disabled, want 10", sent)
	}
	for _, ev := range []int64{second, third} {
		if st, _, err := f.db.WebhookDeliveryStatus(ctx, ev, hook.ID); err != nil || st != "dropped" {
			t.Errorf("event %d: delivery %s, %v; want dropped", ev, st, err)
		}
	}
	if st, _, _ := f.db.WebhookDeliveryStatus(ctx, first, hook.ID); st != "delivered" {
		t.Errorf("first event: %s, want delivered", st)
	}
	f.event(t, domain.Crypto, "ADA_USDT")
	f.dispatch(t)
	if r.count() != before+10 {
		t.Error("a disabled subscription received a new event")
	}
	// The operator re-enables it: new events reach it again.
	if err := f.db.EnableWebhook(ctx, hook.ID); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.status = http.StatusOK
	r.mu.Unlock()
	f.event(t, domain.Crypto, "XRP_USDT")
	f.dispatch(t)
	if r.count() != before+11 {
		t.Errorf("after enable: %d requests, want one more", r.count()-before-10)
	}
}

// Without the test opt-in, a callback that resolves to a loopback address
// is refused at dial time (and counted as a failure), never connected to.
func TestWebhookRefusesInternalAddress(t *testing.T) {
	t.Parallel()
	r := newReceiver(t, http.StatusOK)
	f := newWebhookFixture(t, r, false)
	ctx := context.Background()
	hook, _, err := f.db.CreateWebhook(ctx, f.box, f.client(t, domain.Markets...), r.srv.URL+"/hook", nil)
	if err != nil {
		t.Fatal(err)
	}
	f.event(t, domain.Crypto, "BTC_USDT")
	f.dispatch(t)
	if r.count() != 0 {
		t.Fatalf("the receiver on 127.0.0.1 was reached")
	}
	hooks, _ := f.db.Webhooks(ctx, hook.ClientID)
	if hooks[0].ConsecutiveFailures != 1 || !bytes.Contains([]byte(hooks[0].LastError), []byte("refused to connect")) {
		t.Errorf("after a refused dial: %+v", hooks[0])
	}
}
