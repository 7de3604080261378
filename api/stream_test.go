package api_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/invalidation"
	"github.com/marketscreener/market/rediskeys"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
	"github.com/marketscreener/market/stream"
)

// streamReplica is one api replica with the real gate, hub and slots.
type streamReplica struct {
	srv  *httptest.Server
	gate *admission.Gate
	hub  *stream.Hub
}

// streamFixture is a schema and a Redis prefix shared by replicas.
type streamFixture struct {
	db       *store.DB
	prefix   string
	bus      *invalidation.Bus
	clientID string
	key      string
	keyID    string
}

func newStreamFixture(t *testing.T, tier domain.Tier, markets ...domain.Market) *streamFixture {
	t.Helper()
	db := storetest.New(t)
	if len(markets) == 0 {
		markets = domain.Markets
	}
	c := &domain.Client{OrgName: "Streams", Tier: tier, Markets: markets}
	if err := db.CreateClient(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	key, rec, err := db.IssueKey(context.Background(), c.ID)
	if err != nil {
		t.Fatal(err)
	}
	prefix := redistest.Prefix(t)
	return &streamFixture{db: db, prefix: prefix, bus: invalidation.NewBus(redistest.Client(t), rediskeys.Space(prefix), nil),
		clientID: c.ID, key: key, keyID: rec.ID}
}

func (f *streamFixture) replica(t *testing.T) *streamReplica {
	t.Helper()
	return f.replicaWith(t, replicaOptions{})
}

// replicaOptions change a test replica.
type replicaOptions struct {
	data    api.StreamData                  // what streams read (the fixture's store when nil)
	slotTTL time.Duration                   // the stream slots' lease (stream.DefaultSlotTTL when 0)
	slots   *redis.Client                   // the stream slots' Redis (the test Redis when nil)
	listen  func(net.Listener) net.Listener // wraps the server's listener
	replays int                             // api.Config.StreamReplays (its default when 0)
}

func (f *streamFixture) replicaWith(t *testing.T, o replicaOptions) *streamReplica {
	t.Helper()
	if o.data == nil {
		o.data = f.db
	}
	rdb := redistest.Client(t)
	gate := admission.New(admission.Config{Redis: rdb, Prefix: f.prefix, Keys: f.db, Usage: f.db})
	r := &streamReplica{gate: gate}
	var srv *api.Server
	r.hub = stream.NewHub(stream.HubConfig{Source: f.db,
		Render: func(ctx context.Context, e domain.StreamEvent) ([]byte, error) { return srv.RenderStreamEvent(ctx, e) }})
	srv = api.New(api.Config{Region: "global", Stream: r.hub, StreamData: o.data,
		StreamSlots: stream.NewSlots(cmp.Or(o.slots, rdb), f.prefix, o.slotTTL, nil), StreamHeartbeat: 100 * time.Millisecond,
		RequestTimeout: 300 * time.Millisecond, StreamReplays: o.replays}, f.db, gate) // a stream outlives the request budget
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = gate.Run(ctx) }()
	go func() { defer wg.Done(); _ = r.hub.Run(ctx) }()
	r.srv = httptest.NewUnstartedServer(srv.Handler())
	if o.listen != nil {
		r.srv.Listener = o.listen(r.srv.Listener)
	}
	r.srv.Start()
	t.Cleanup(func() {
		cancel()
		r.srv.CloseClientConnections()
		r.srv.Close()
		wg.Wait()
		gate.Close()
	})
	return r
}

// verdictEvent commits one verdict change and returns its verdict event id.
func (f *streamFixture) verdictEvent(t *testing.T, m domain.Market, symbol string) int64 {
	t.Helper()
	var id int64
	err := f.db.Pool.QueryRow(context.Background(), `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
		VALUES ($1, $2, 'neutral', 'growth', 25, clock_timestamp()) RETURNING id`, string(m), symbol).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

type sseEvent struct {
	ID    string
	Event string
	Data  string
}

// sseConn is an open stream read by a goroutine.
type sseConn struct {
	resp       *http.Response
	events     chan sseEvent
	heartbeats chan struct{}
	done       chan struct{}
	closeFn    func()
}

func openStream(t *testing.T, base, key, query string, header http.Header) (*sseConn, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/public/stream"+query, nil)
	req.Header.Set("X-API-Key", key)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		return nil, resp
	}
	c := &sseConn{resp: resp, events: make(chan sseEvent, 1000), heartbeats: make(chan struct{}, 1000), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Event != "" {
					c.events <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ": heartbeat"):
				select {
				case c.heartbeats <- struct{}{}:
				default:
				}
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.Event = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.Data = line[6:]
			}
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-c.done })
	c.closeFn = cancel
	return c, resp
}

// next waits for the next event (10 s at most: a failure, not a timing).
func (c *sseConn) next(t *testing.T) sseEvent {
	t.Helper()
	select {
	case ev := <-c.events:
		return ev
	case <-c.done:
		select {
		case ev := <-c.events:
			return ev
		default:
		}
		t.Fatal("the stream ended")
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	return sseEvent{}
}

func verdictOf(t *testing.T, ev sseEvent) api.StreamVerdictChanged {
	t.Helper()
	var v api.StreamVerdictChanged
	if err := json.Unmarshal([]byte(ev.Data), &v); err != nil {
		t.Fatalf("data %q: %v", ev.Data, err)
	}
	if v.ModelVersion == "" {
		t.Errorf("verdict_changed without model_version: %s", ev.Data)
	}
	return v
}

func TestStreamResumeAfterADroppedConnectionLosesNothingAndRepeatsNothing(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t, domain.Business)
	r := f.replica(t)
	first, resp := openStream(t, r.srv.URL, f.key, "?market=crypto&events=verdict_changed", nil)
	if first == nil {
		t.Fatalf("open: %d", resp.StatusCode)
	}
	var want []int64
	for i := range 6 {
		want = append(want, f.verdictEvent(t, domain.Crypto, fmt.Sprintf("S%d_USDT", i)))
		f.verdictEvent(t, domain.Forex, fmt.Sprintf("F%d_USD", i)) // another market: not for this stream
	}
	var lastID string
	for i := range 3 {
		ev := first.next(t)
		if ev.Event != "verdict_changed" || verdictOf(t, ev).ID != fmt.Sprint(want[i]) || verdictOf(t, ev).Market != "crypto" {
			t.Fatalf("live event %d: %+v, want verdict event %d", i, ev, want[i])
		}
		lastID = ev.ID
	}
	first.closeFn() // the connection drops; events keep happening
	<-first.done
	for i := 6; i < 9; i++ {
		want = append(want, f.verdictEvent(t, domain.Crypto, fmt.Sprintf("S%d_USDT", i)))
	}
	second, resp := openStream(t, r.srv.URL, f.key, "?market=crypto&events=verdict_changed", http.Header{"Last-Event-Id": {lastID}})
	if second == nil {
		t.Fatalf("resume: %d", resp.StatusCode)
	}
	var got []string
	seen := map[string]bool{}
	for range len(want) - 3 {
		ev := second.next(t)
		if seen[ev.ID] {
			t.Fatalf("event id %s sent twice", ev.ID)
		}
		seen[ev.ID] = true
		got = append(got, verdictOf(t, ev).ID)
	}
	if fmt.Sprint(got) != fmt.Sprint(want[3:]) {
		t.Fatalf("after resume: verdict events %v, want %v", got, want[3:])
	}
	live := f.verdictEvent(t, domain.Crypto, "LIVE_USDT")
	if ev := second.next(t); verdictOf(t, ev).ID != fmt.Sprint(live) {
		t.Fatalf("live after replay: %+v, want %d", ev, live)
	}
	select {
	case ev := <-second.events:
		t.Fatalf("an extra event: %+v", ev)
	default:
	}
	// Two connections, two requests: a stream is one request, however long.
	if used, err := f.db.UsedThisMonth(context.Background(), f.clientID, time.Now()); err != nil || used != 2 {
		t.Fatalf("used this month %d (%v), want 2", used, err)
	}
}

// A resume from an id the stream no longer holds (pruned, or never one of
// its ids) replays nothing: one resync event telling the client to reload
// from the REST endpoints, then live events.
func TestStreamResumeFromAnIdNoLongerHeldSendsResyncThenLiveEvents(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t, domain.Business)
	r := f.replica(t)
	first, resp := openStream(t, r.srv.URL, f.key, "?events=verdict_changed", nil)
	if first == nil {
		t.Fatalf("open: %d", resp.StatusCode)
	}
	f.verdictEvent(t, domain.Crypto, "GONE_USDT")
	pruned := first.next(t).ID
	first.closeFn()
	<-first.done
	if _, err := f.db.Pool.Exec(context.Background(), `DELETE FROM stream_events WHERE id = $1`, pruned); err != nil {
		t.Fatal(err)
	}
	f.verdictEvent(t, domain.Crypto, "MISSED_USDT") // after the pruned id: a replay would send it
	for _, last := range []string{pruned, "0"} {
		c, resp := openStream(t, r.srv.URL, f.key, "?events=verdict_changed", http.Header{"Last-Event-Id": {last}})
		if c == nil {
			t.Fatalf("resume from %s: %d", last, resp.StatusCode)
		}
		ev := c.next(t)
		var rs api.StreamResync
		if ev.Event != "resync" || ev.ID != "" || json.Unmarshal([]byte(ev.Data), &rs) != nil || rs.LastEventID != last ||
			!strings.Contains(rs.Detail, "REST") {
			t.Fatalf("resume from %s: first event %+v, want a resync without id naming it", last, ev)
		}
		live := f.verdictEvent(t, domain.Crypto, "LIVE_USDT")
		if ev := c.next(t); ev.Event != "verdict_changed" || verdictOf(t, ev).ID != fmt.Sprint(live) {
			t.Fatalf("resume from %s: after the resync %+v, want the live event %d", last, ev, live)
		}
		c.closeFn()
		<-c.done
	}
}

// A replay longer than a page goes on page after page, each resuming
// where the last ended: every event once, in order, then live ones.
func TestStreamReplayOfManyPagesSendsEveryEventOnceInOrder(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t, domain.Enterprise)
	r := f.replica(t)
	first, resp := openStream(t, r.srv.URL, f.key, "?events=verdict_changed", nil)
	if first == nil {
		t.Fatalf("open: %d", resp.StatusCode)
	}
	f.verdictEvent(t, domain.Crypto, "FIRST_USDT")
	from := first.next(t).ID
	first.closeFn()
	<-first.done
	const n = 1234 // two full pages of 500 and a part
	if _, err := f.db.Pool.Exec(context.Background(), `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
		SELECT 'crypto', 'R' || i || '_USDT', 'neutral', 'growth', 25, clock_timestamp() FROM generate_series(1, $1) i`, n); err != nil {
		t.Fatal(err)
	}
	c, resp := openStream(t, r.srv.URL, f.key, "?events=verdict_changed", http.Header{"Last-Event-Id": {from}})
	if c == nil {
		t.Fatalf("resume: %d", resp.StatusCode)
	}
	for i := 1; i <= n; i++ {
		if ev := c.next(t); verdictOf(t, ev).Symbol != fmt.Sprintf("R%d_USDT", i) {
			t.Fatalf("replayed event %d: %+v", i, ev)
		}
	}
	live := f.verdictEvent(t, domain.Crypto, "LIVE_USDT")
	if ev := c.next(t); verdictOf(t, ev).ID != fmt.Sprint(live) {
		t.Fatalf("after the replay %+v, want the live event %d", ev, live)
	}
}

func TestStreamCarriesScreenerRefreshesAndHeartbeats(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t, domain.Enterprise)
	r := f.replica(t)
	c, resp := openStream(t, r.srv.URL, f.key, "?events=screener", nil)
	if c == nil {
		t.Fatalf("open: %d", resp.StatusCode)
	}
	// Five heartbeats, 100 ms apart: past the 300 ms request budget.
	for range 5 {
		select {
		case <-c.heartbeats:
		case <-time.After(10 * time.Second):
			t.Fatal("no heartbeat")
		}
	}
	f.verdictEvent(t, domain.Crypto, "BTC_USDT") // not asked for
	at := time.Now().UTC().Truncate(time.Second)
	rows := []domain.Ticker{{Symbol: "BTC_USDT", Price: 97000, ChangePct: 1.5, Volume: 1e9, UpdatedAt: at},
		{Symbol: "ETH_USDT", Price: 3000, ChangePct: -2, Volume: 5e8, UpdatedAt: at}}
	if err := f.db.ReplaceTickers(context.Background(), binanceSpot, rows); err != nil {
		t.Fatal(err)
	}
	ev := c.next(t)
	var got api.StreamScreener
	if err := json.Unmarshal([]byte(ev.Data), &got); err != nil || ev.Event != "screener" {
		t.Fatalf("event %+v: %v", ev, err)
	}
	if got.Market != "crypto" || got.Exchange != "binance" || got.Instrument != "spot" || len(got.Rows) != 2 || got.Rows[0].Price != 97000 {
		t.Fatalf("screener event %+v", got)
	}
}

func TestStreamTwoReplicasStreamTheSameEvents(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t, domain.Business)
	a, b := f.replica(t), f.replica(t)
	ca, resp := openStream(t, a.srv.URL, f.key, "?events=verdict_changed", nil)
	if ca == nil {
		t.Fatalf("open a: %d", resp.StatusCode)
	}
	cb, resp := openStream(t, b.srv.URL, f.key, "?events=verdict_changed", nil)
	if cb == nil {
		t.Fatalf("open b: %d", resp.StatusCode)
	}
	var want []string
	for i := range 5 {
		want = append(want, fmt.Sprint(f.verdictEvent(t, domain.Markets[i%3], fmt.Sprintf("X%d", i))))
	}
	for name, c := range map[string]*sseConn{"a": ca, "b": cb} {
		var got []string
		var ids []string
		for range want {
			ev := c.next(t)
			got = append(got, verdictOf(t, ev).ID)
			ids = append(ids, ev.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("replica %s: %v, want %v", name, got, want)
		}
		_ = ids
	}
}

func TestStreamConcurrencyCapPerClientAcrossReplicas(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t, domain.Starter, domain.Crypto) // 2 streams
	a, b := f.replica(t), f.replica(t)
	c1, resp := openStream(t, a.srv.URL, f.key, "", nil)
	if c1 == nil {
		t.Fatalf("first: %d", resp.StatusCode)
	}
	if c2, resp := openStream(t, b.srv.URL, f.key, "", nil); c2 == nil {
		t.Fatalf("second: %d", resp.StatusCode)
	}
	_, resp = openStream(t, a.srv.URL, f.key, "", nil)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third: %d, want 429 with Retry-After", resp.StatusCode)
	}
	resp.Body.Close()
	c1.closeFn()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c3, resp := openStream(t, b.srv.URL, f.key, "", nil)
		if c3 != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("a closed stream's slot did not come back: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStreamOfARevokedKeyClosesWithinASecond(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t, domain.Business)
	r := f.replica(t)
	c, resp := openStream(t, r.srv.URL, f.key, "", nil)
	if c == nil {
		t.Fatalf("open: %d", resp.StatusCode)
	}
	select {
	case <-c.heartbeats: // the stream is up and checking
	case <-time.After(10 * time.Second):
		t.Fatal("no heartbeat")
	}
	// As marketd keys revoke does: the row, then the bus.
	if _, err := f.db.RevokeKey(context.Background(), f.keyID); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	if err := f.bus.Publish(context.Background(), invalidation.KeyRevoked(domain.HashKey(f.key))); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-c.events:
		if ev.Event != "closed" || !strings.Contains(ev.Data, `"status":401`) {
			t.Fatalf("last event %+v, want closed with 401", ev)
		}
	case <-time.After(time.Second):
		t.Fatal("the revoked key's stream was still open after 1 s")
	}
	select {
	case <-c.done:
	case <-time.After(time.Until(revoked.Add(time.Second))):
		t.Fatal("the revoked key's stream was still open after 1 s")
	}
}

func TestStreamBadParametersAre400NamingTheParameter(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t, domain.Starter, domain.Crypto)
	r := f.replica(t)
	for _, tc := range []struct {
		query  string
		header http.Header
		status int
		loc    string
	}{
		{"?events=trades", nil, 400, "query.events"},
		{"?events=,", nil, 400, "query.events"},
		{"?market=bonds", nil, 400, "query.market"},
		{"?market=", nil, 0, ""},
		{"", http.Header{"Last-Event-Id": {"abc"}}, 400, "header.Last-Event-ID"},
		{"?last_event_id=-1", nil, 400, "query.last_event_id"},
		{"?market=forex", nil, 403, ""},
	} {
		c, resp := openStream(t, r.srv.URL, f.key, tc.query, tc.header)
		if tc.status == 0 {
			if c == nil {
				t.Errorf("%s: %d, want 200", tc.query, resp.StatusCode)
			} else {
				c.closeFn()
			}
			continue
		}
		if c != nil {
			t.Errorf("%s %v: 200, want %d", tc.query, tc.header, tc.status)
			continue
		}
		var body struct {
			Errors []struct{ Location string } `json:"errors"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || tc.loc != "" && (len(body.Errors) == 0 || body.Errors[0].Location != tc.loc) {
			t.Errorf("%s %v: %d %+v, want %d naming %s", tc.query, tc.header, resp.StatusCode, body, tc.status, tc.loc)
		}
	}
}

func TestStreamOfASuspendedClientOrAShrunkTierCloses(t *testing.T) {
	t.Parallel()
	for name, change := range map[string]func(f *streamFixture) error{
		"suspended": func(f *streamFixture) error {
			_, err := f.db.SetClientStatus(context.Background(), f.clientID, domain.StatusSuspended)
			return err
		},
		"tier": func(f *streamFixture) error {
			_, err := f.db.SetClientTier(context.Background(), f.clientID, domain.Starter, []domain.Market{domain.Forex})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newStreamFixture(t, domain.Business)
			r := f.replica(t)
			c, resp := openStream(t, r.srv.URL, f.key, "?market=crypto", nil)
			if c == nil {
				t.Fatalf("open: %d", resp.StatusCode)
			}
			if err := change(f); err != nil {
				t.Fatal(err)
			}
			if err := f.bus.Publish(context.Background(), invalidation.ClientChanged(f.clientID)); err != nil {
				t.Fatal(err)
			}
			if ev := c.next(t); ev.Event != "closed" || !strings.Contains(ev.Data, `"status":403`) {
				t.Fatalf("last event %+v, want closed with 403", ev)
			}
		})
	}
}
