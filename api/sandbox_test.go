package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/alerting"
	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/stream"
	"github.com/marketscreener/market/webhook"
)

// sandboxFixture is a live and a sandbox database behind one router, as
// marketd api runs them.
type sandboxFixture struct {
	*streamFixture
	sandboxDB  *store.DB
	sandboxKey string
	url        string
}

func newSandboxFixture(t *testing.T, rate int) *sandboxFixture {
	t.Helper()
	f := &sandboxFixture{streamFixture: newStreamFixture(t, domain.Business), sandboxDB: storetest.New(t)}
	ctx := context.Background()
	if _, err := f.db.SetClientLimits(ctx, f.clientID, &rate, nil, false, nil); err != nil {
		t.Fatal(err)
	}
	key, _, err := f.db.IssueSandboxKey(ctx, f.clientID)
	if err != nil {
		t.Fatal(err)
	}
	f.sandboxKey = key
	rdb := redistest.Client(t)
	gate := admission.New(admission.Config{Redis: rdb, Prefix: f.prefix, Keys: f.db, Usage: f.db})
	// As marketd api: each server a hub of its own over its own log.
	var live, sandbox *api.Server
	hub := stream.NewHub(stream.HubConfig{Source: f.db,
		Render: func(ctx context.Context, e domain.StreamEvent) ([]byte, error) { return live.RenderStreamEvent(ctx, e) }})
	sandboxHub := stream.NewHub(stream.HubConfig{Source: f.sandboxDB,
		Render: func(ctx context.Context, e domain.StreamEvent) ([]byte, error) {
			return sandbox.RenderStreamEvent(ctx, e)
		}})
	cfg := api.Config{Region: "global", Stream: hub, StreamData: f.db, StreamSlots: stream.NewSlots(rdb, f.prefix, 0, nil)}
	live = api.New(cfg, f.db, gate)
	cfg.Sandbox, cfg.SandboxPusher = true, store.SandboxPusher{Live: f.db, Sandbox: f.sandboxDB, Alerts: &alerting.Matcher{}}
	cfg.Stream, cfg.StreamData = sandboxHub, f.sandboxDB
	sandbox = api.New(cfg, api.SandboxStore{MarketData: f.sandboxDB, AnalyticsData: f.sandboxDB, WebhookData: f.db, AlertData: f.db}, gate)
	runCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); _ = gate.Run(runCtx) }()
	go func() { defer wg.Done(); _ = hub.Run(runCtx) }()
	go func() { defer wg.Done(); _ = sandboxHub.Run(runCtx) }()
	srv := httptest.NewServer(api.SandboxRouter(live, sandbox))
	f.url = srv.URL
	t.Cleanup(func() {
		cancel()
		srv.CloseClientConnections()
		srv.Close()
		wg.Wait()
		gate.Close()
	})
	return f
}

func (f *sandboxFixture) do(t *testing.T, method, path, key, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, f.url+"/api/v1/public"+path, strings.NewReader(body))
	req.Header.Set("X-API-Key", key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestSandboxKeysSeeSandboxDataOnlyAndLiveKeysLiveDataOnly(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t, 100)
	ctx := context.Background()
	now := time.Now().UTC()
	for db, price := range map[*store.DB]float64{f.db: 100, f.sandboxDB: 555} {
		if err := db.ReplaceTickers(ctx, binanceSpot, []domain.Ticker{{Symbol: "BTC_USDT", Price: price, Volume: 1, UpdatedAt: now}}); err != nil {
			t.Fatal(err)
		}
		_ = db.RecordFeedSuccess(ctx, binanceSpot, "tickers", now)
	}
	for key, want := range map[string]float64{f.key: 100, f.sandboxKey: 555} {
		status, body := f.do(t, http.MethodGet, "/screener/crypto/binance/spot", key, "")
		var rows []api.ScreenerRecord
		_ = json.Unmarshal(body, &rows)
		if status != 200 || len(rows) != 1 || rows[0].Price != want {
			t.Errorf("%s…: %d %s, want the price %v", domain.KeyDisplayPrefix(key), status, body, want)
		}
	}
}

func TestSandboxRequestsAreRateLimitedButNeverCountedAgainstTheQuota(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t, 3)
	if status, _ := f.do(t, http.MethodGet, "/usage", f.key, ""); status != 200 {
		t.Fatalf("live usage: %d", status)
	}
	for i := range 2 {
		status, body := f.do(t, http.MethodGet, "/usage", f.sandboxKey, "")
		var u api.UsageRecord
		_ = json.Unmarshal(body, &u)
		if status != 200 || u.UsedThisMonth != 1 {
			t.Fatalf("sandbox usage %d: %d %s, want used_this_month 1 (the live request only)", i, status, body)
		}
	}
	if status, _ := f.do(t, http.MethodGet, "/usage", f.sandboxKey, ""); status != http.StatusTooManyRequests {
		t.Fatalf("a fourth request of a 3/minute client: %d, want 429", status)
	}
	if used, err := f.db.UsedThisMonth(context.Background(), f.clientID, time.Now()); err != nil || used != 1 {
		t.Fatalf("ledger %d (%v), want 1", used, err)
	}
}

func TestSandboxPushReachesTheClientsSandboxStreamsOnly(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t, 100)
	sandboxStream, resp := openStream(t, f.url, f.sandboxKey, "", nil)
	if sandboxStream == nil {
		t.Fatalf("sandbox stream: %d", resp.StatusCode)
	}
	liveStream, resp := openStream(t, f.url, f.key, "?events=verdict_changed", nil)
	if liveStream == nil {
		t.Fatalf("live stream: %d", resp.StatusCode)
	}
	// A second client of the same deployment, with a sandbox stream too.
	c2 := &domain.Client{OrgName: "Other", Tier: domain.Business, Markets: domain.Markets}
	if err := f.db.CreateClient(context.Background(), c2); err != nil {
		t.Fatal(err)
	}
	key2, _, err := f.db.IssueSandboxKey(context.Background(), c2.ID)
	if err != nil {
		t.Fatal(err)
	}
	otherStream, resp := openStream(t, f.url, key2, "", nil)
	if otherStream == nil {
		t.Fatalf("other client's sandbox stream: %d", resp.StatusCode)
	}

	status, body := f.do(t, http.MethodPost, "/sandbox/verdict-change", f.sandboxKey,
		`{"market":"crypto","symbol":"btc/usdt","new_verdict":"decline"}`)
	var pushed api.StreamVerdictChanged
	_ = json.Unmarshal(body, &pushed)
	if status != http.StatusAccepted || !pushed.Sandbox || pushed.Symbol != "BTC_USDT" || pushed.OldVerdict != "neutral" || pushed.OverallScore != -35 {
		t.Fatalf("push: %d %s", status, body)
	}
	ev := sandboxStream.next(t)
	got := verdictOf(t, ev)
	if ev.Event != "verdict_changed" || got.ID != pushed.ID || !got.Sandbox || got.NewVerdict != "decline" ||
		pushed.ModelVersion != analytics.CurrentVersion().Name || got.ModelVersion != pushed.ModelVersion {
		t.Fatalf("sandbox stream got %+v", ev)
	}
	// A real event afterwards reaches the live stream, never the sandbox one.
	real := f.verdictEvent(t, domain.Crypto, "ETH_USDT")
	if ev := liveStream.next(t); verdictOf(t, ev).ID != webhookID(real) || verdictOf(t, ev).Sandbox {
		t.Fatalf("live stream got %+v, want the real event %d first (the push is not for it)", ev, real)
	}
	select {
	case ev := <-sandboxStream.events:
		t.Fatalf("the sandbox stream got a live event: %+v", ev)
	case ev := <-otherStream.events:
		t.Fatalf("another client's sandbox stream got the push: %+v", ev)
	case <-time.After(500 * time.Millisecond): // the hub polls every 250 ms
	}
}

// A sandbox push fires the client's matching alerts through the same
// path: an alert event in the outbox (sandbox, the client's webhooks) and
// an alert event on the client's sandbox stream, with the same id.
func TestSandboxPushFiresTheClientsAlerts(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t, 100)
	status, body := f.do(t, http.MethodPost, "/alerts", f.sandboxKey, `{"name":"decline","market":"crypto","where":"verdict == \"decline\""}`)
	var a api.AlertDefinition
	if status != http.StatusCreated || json.Unmarshal(body, &a) != nil {
		t.Fatalf("create alert: %d %s", status, body)
	}
	f.do(t, http.MethodPost, "/alerts", f.sandboxKey, `{"name":"growth","market":"crypto","where":"verdict == \"growth\""}`)
	sandboxStream, resp := openStream(t, f.url, f.sandboxKey, "?events=alert", nil)
	if sandboxStream == nil {
		t.Fatalf("sandbox stream: %d", resp.StatusCode)
	}
	if status, body := f.do(t, http.MethodPost, "/sandbox/verdict-change", f.sandboxKey,
		`{"market":"crypto","symbol":"btc/usdt","new_verdict":"decline"}`); status != http.StatusAccepted {
		t.Fatalf("push: %d %s", status, body)
	}
	evs, err := f.db.AlertEvents(context.Background(), 0, 10)
	if err != nil || len(evs) != 1 || evs[0].AlertID != a.ID || !evs[0].Sandbox || evs[0].Symbol != "BTC_USDT" || evs[0].Read["verdict"] != "decline" {
		t.Fatalf("alert events = %+v, %v; want the decline alert's, sandbox", evs, err)
	}
	ev := sandboxStream.next(t)
	var data webhook.AlertTriggered
	if ev.Event != "alert" || json.Unmarshal([]byte(ev.Data), &data) != nil || data.ID != webhook.EventID(evs[0].ID) ||
		data.AlertID != a.ID || !data.Sandbox || data.Event != "alert.triggered" {
		t.Fatalf("sandbox stream got %+v", ev)
	}
}

func webhookID(id int64) string { b, _ := json.Marshal(id); return string(b) }

func TestSandboxPushIsForSandboxKeysAndChecksItsBody(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t, 100)
	if status, body := f.do(t, http.MethodPost, "/sandbox/verdict-change", f.key,
		`{"market":"crypto","symbol":"BTC_USDT","new_verdict":"growth"}`); status != http.StatusForbidden {
		t.Fatalf("live key: %d %s, want 403", status, body)
	}
	for body, loc := range map[string]string{
		`{"market":"bonds","symbol":"BTC_USDT","new_verdict":"growth"}`:                         "body.market",
		`{"market":"crypto","symbol":"BTC_USDT","new_verdict":"up"}`:                            "body.new_verdict",
		`{"market":"crypto","symbol":"%%%","new_verdict":"growth"}`:                             "body.symbol",
		`{"market":"crypto","symbol":"BTC_USDT","new_verdict":"growth","old_verdict":"growth"}`: "body.old_verdict",
		`{"market":"crypto","symbol":"BTC_USDT","new_verdict":"growth","overall_score":101}`:    "body.overall_score",
	} {
		status, b := f.do(t, http.MethodPost, "/sandbox/verdict-change", f.sandboxKey, body)
		if status != 400 || !bytes.Contains(b, []byte(`"location":"`+loc+`"`)) {
			t.Errorf("%s: %d %s, want 400 naming %s", body, status, b, loc)
		}
	}
}

func TestSandboxKeysGet503WhereNoSandboxIsSetUp(t *testing.T) {
	t.Parallel()
	f := newMarketFixture(t)
	key, _, err := f.db.IssueSandboxKey(context.Background(), mustClientOf(t, f))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.SandboxRouter(f.apiS, nil))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/public/usage", nil)
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("sandbox key without a sandbox: %d, want 503", resp.StatusCode)
	}
	// And a sandbox key sent straight to a live server is refused there.
	req.URL, _ = req.URL.Parse(f.srv.URL + "/api/v1/public/usage")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("sandbox key on the live server: %d, want 403", resp.StatusCode)
	}
}

func mustClientOf(t *testing.T, f *marketFixture) string {
	t.Helper()
	_, k, err := f.db.Authenticate(context.Background(), domain.HashKey(f.key))
	if err != nil {
		t.Fatal(err)
	}
	return k.ClientID
}

// A sandbox key's stream is the sandbox's log: its synthetic verdict
// changes and screener refreshes (the sandbox's rows) and its own client's
// pushes, in one id space, so a resume with Last-Event-ID across both
// kinds loses nothing and repeats nothing. Another client's sandbox stream
// never sees the first one's pushes, and a live stream sees none of it.
func TestSandboxStreamCarriesSyntheticEventsAndItsOwnPushesResumably(t *testing.T) {
	t.Parallel()
	f := newSandboxFixture(t, 1000)
	ctx := context.Background()
	c2 := &domain.Client{OrgName: "Other", Tier: domain.Business, Markets: domain.Markets}
	if err := f.db.CreateClient(ctx, c2); err != nil {
		t.Fatal(err)
	}
	key2, _, err := f.db.IssueSandboxKey(ctx, c2.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Events are told apart by symbol: SYN* are the sandbox scorer's
	// verdict changes, the others pushes.
	synthetic := func(symbol string) {
		t.Helper()
		if _, err := f.sandboxDB.Pool.Exec(ctx, `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
			VALUES ('crypto', $1, 'neutral', 'growth', 25, clock_timestamp())`, symbol); err != nil {
			t.Fatal(err)
		}
	}
	pushed := map[string]string{} // symbol → the push's event id
	push := func(key, symbol string) {
		t.Helper()
		status, body := f.do(t, http.MethodPost, "/sandbox/verdict-change", key,
			`{"market":"crypto","symbol":"`+symbol+`","new_verdict":"decline"}`)
		var v api.StreamVerdictChanged
		_ = json.Unmarshal(body, &v)
		if status != http.StatusAccepted || v.ID == "" {
			t.Fatalf("push %s: %d %s", symbol, status, body)
		}
		pushed[symbol] = v.ID
	}
	// want reads the next events of c, one per expected symbol (or
	// "screener": the sandbox's screener rows), with increasing ids, and
	// returns the last id.
	want := func(c *sseConn, what string, expected ...string) string {
		t.Helper()
		var last int64 = -1
		var lastID string
		for _, w := range expected {
			ev := c.next(t)
			id, err := strconv.ParseInt(ev.ID, 10, 64)
			if err != nil || id <= last {
				t.Fatalf("%s: event id %q after %d, want increasing ids", what, ev.ID, last)
			}
			last, lastID = id, ev.ID
			if w == "screener" {
				var sc api.StreamScreener
				if ev.Event != "screener" || json.Unmarshal([]byte(ev.Data), &sc) != nil || len(sc.Rows) != 1 || sc.Rows[0].Price != 555 {
					t.Fatalf("%s: %+v, want the sandbox's screener rows (price 555)", what, ev)
				}
				continue
			}
			v := verdictOf(t, ev)
			isPush := !strings.HasPrefix(w, "SYN")
			if ev.Event != "verdict_changed" || v.Symbol != w || v.Sandbox != isPush || (isPush && v.ID != pushed[w]) ||
				(!isPush && !strings.HasPrefix(v.ID, api.SandboxSyntheticIDPrefix)) {
				t.Fatalf("%s: %+v, want the verdict event of %s (push: %v)", what, ev, w, isPush)
			}
		}
		return lastID
	}

	first, resp := openStream(t, f.url, f.sandboxKey, "", nil)
	if first == nil {
		t.Fatalf("sandbox stream: %d", resp.StatusCode)
	}
	other, resp := openStream(t, f.url, key2, "", nil)
	if other == nil {
		t.Fatalf("other client's sandbox stream: %d", resp.StatusCode)
	}
	live, resp := openStream(t, f.url, f.key, "", nil)
	if live == nil {
		t.Fatalf("live stream: %d", resp.StatusCode)
	}

	synthetic("SYN1")
	push(f.sandboxKey, "BTC_USDT")
	lastSeen := want(first, "first sandbox stream", "SYN1", "BTC_USDT")
	first.closeFn()

	// While the first stream is away: a synthetic screener refresh, a push
	// of its own, another client's push, a synthetic verdict change.
	now := time.Now().UTC()
	if err := f.sandboxDB.ReplaceTickers(ctx, binanceSpot, []domain.Ticker{{Symbol: "BTC_USDT", Price: 555, Volume: 1, UpdatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	push(f.sandboxKey, "ETH_USDT")
	push(key2, "SOL_USDT")
	synthetic("SYN2")
	// The other client: the synthetic events and its own push, in order,
	// never the first client's. Once it has SYN2, the hub is past every
	// event of the gap: the resume below replays them all from the log.
	want(other, "other client's sandbox stream", "SYN1", "screener", "SOL_USDT", "SYN2")

	resumed, resp := openStream(t, f.url, f.sandboxKey, "", http.Header{"Last-Event-Id": {lastSeen}})
	if resumed == nil {
		t.Fatalf("resumed stream: %d", resp.StatusCode)
	}
	want(resumed, "resumed after the push", "screener", "ETH_USDT", "SYN2")
	push(f.sandboxKey, "XRP_USDT")
	synthetic("SYN3")
	// Then live events: the replayed ones not again, nothing lost.
	want(resumed, "live after the resume", "XRP_USDT", "SYN3")

	// Not XRP_USDT either: SYN3 comes right after SYN2.
	want(other, "other client's sandbox stream, later", "SYN3")

	// The live stream: none of it (live events are its first).
	if err := f.db.ReplaceTickers(ctx, binanceSpot, []domain.Ticker{{Symbol: "BTC_USDT", Price: 100, Volume: 1, UpdatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	// The live rows (price 100), not the sandbox's (555). (A substring test
	// on "555" also matched a timestamp's microseconds.)
	if ev := live.next(t); ev.Event != "screener" || !strings.Contains(ev.Data, `"price":100,`) || strings.Contains(ev.Data, `"price":555`) {
		t.Fatalf("live stream's first event %+v, want the live screener refresh", ev)
	}
	real := webhookID(f.verdictEvent(t, domain.Crypto, "LIVE1"))
	if ev := live.next(t); ev.Event != "verdict_changed" || verdictOf(t, ev).ID != real || verdictOf(t, ev).Symbol != "LIVE1" {
		t.Fatalf("live stream's second event %+v, want the live verdict event %s", ev, real)
	}
}
