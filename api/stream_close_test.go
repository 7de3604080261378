package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/marketscreener/market/api"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/invalidation"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/stream"
)

// closeDeadline is how long a test waits for a stream to end after its
// key stopped being served: generous (the goal is one second, logged),
// yet well under the 10 s a write may block on a client that does not
// read, which is what the guard must not wait for.
const closeDeadline = 5 * time.Second

// keyChange stops a stream's key from being served, as the operator CLI
// does (the row, then the bus), and returns when it took effect and the
// status of the closing event.
type keyChange struct {
	name   string
	status int
	apply  func(t *testing.T, f *streamFixture) time.Time
}

var keyChanges = []keyChange{
	{"revoked", http.StatusUnauthorized, func(t *testing.T, f *streamFixture) time.Time {
		if _, err := f.db.RevokeKey(context.Background(), f.keyID); err != nil {
			t.Fatal(err)
		}
		f.publish(t, invalidation.KeyRevoked(domain.HashKey(f.key)))
		return time.Now()
	}},
	{"suspended", http.StatusForbidden, func(t *testing.T, f *streamFixture) time.Time {
		if _, err := f.db.SetClientStatus(context.Background(), f.clientID, domain.StatusSuspended); err != nil {
			t.Fatal(err)
		}
		f.publish(t, invalidation.ClientChanged(f.clientID))
		return time.Now()
	}},
	{"expired", http.StatusForbidden, func(t *testing.T, f *streamFixture) time.Time {
		// The contract ends a moment from now: nothing announces the
		// instant itself, the stream notices it.
		end := time.Now().Add(300 * time.Millisecond)
		if _, err := f.db.SetClientLimits(context.Background(), f.clientID, nil, nil, false, &end); err != nil {
			t.Fatal(err)
		}
		f.publish(t, invalidation.ClientChanged(f.clientID))
		return end
	}},
	{"tier lost the market", http.StatusForbidden, func(t *testing.T, f *streamFixture) time.Time {
		if _, err := f.db.SetClientTier(context.Background(), f.clientID, domain.Starter, []domain.Market{domain.Forex}); err != nil {
			t.Fatal(err)
		}
		f.publish(t, invalidation.ClientChanged(f.clientID))
		return time.Now()
	}},
}

func (f *streamFixture) publish(t *testing.T, inv invalidation.Message) {
	t.Helper()
	if err := f.bus.Publish(context.Background(), inv); err != nil {
		t.Fatal(err)
	}
}

// A stream ends soon after its key stops being served, whatever it is
// doing: replaying, idle, or blocked writing to a client that does not
// read.
func TestStreamEndsWhenItsKeyIsNoLongerServedInEveryState(t *testing.T) {
	t.Parallel()
	states := map[string]func(t *testing.T, ch keyChange){
		"replaying":   closeWhileReplaying,
		"idle":        closeWhileIdle,
		"slow reader": closeWhileBlockedOnASlowReader,
	}
	for state, run := range states {
		for _, ch := range keyChanges {
			t.Run(state+"/"+ch.name, func(t *testing.T) {
				t.Parallel()
				run(t, ch)
			})
		}
	}
}

func closeWhileIdle(t *testing.T, ch keyChange) {
	f := newStreamFixture(t, domain.Business)
	r := f.replica(t)
	c, resp := openStream(t, r.srv.URL, f.key, "?market=crypto", nil)
	if c == nil {
		t.Fatalf("open: %d", resp.StatusCode)
	}
	select {
	case <-c.heartbeats: // up and idle
	case <-time.After(10 * time.Second):
		t.Fatal("no heartbeat")
	}
	at := ch.apply(t, f)
	c.waitClosed(t, ch.status, at)
}

// blockingReplay is a log whose replay never ends by itself (a slow
// query): only the stream's context ends it.
type blockingReplay struct {
	api.StreamData
	running chan struct{} // closed when a replay is under way
	once    sync.Once
}

func (b *blockingReplay) ReplayStreamEvents(ctx context.Context, _ store.StreamFilter, _, _ domain.StreamPos, _ int) ([]domain.StreamEvent, error) {
	b.once.Do(func() { close(b.running) })
	<-ctx.Done()
	return nil, ctx.Err()
}

func closeWhileReplaying(t *testing.T, ch keyChange) {
	f := newStreamFixture(t, domain.Business)
	data := &blockingReplay{StreamData: f.db, running: make(chan struct{})}
	r := f.replicaWith(t, replicaOptions{data: data})
	// Two events in the log, the stream resumes after the first.
	f.verdictEvent(t, domain.Crypto, "BTC_USDT")
	first := f.lastStreamID(t)
	f.verdictEvent(t, domain.Crypto, "ETH_USDT")
	f.waitReadable(t, f.lastStreamID(t))
	c, resp := openStream(t, r.srv.URL, f.key, "?market=crypto", http.Header{"Last-Event-Id": {fmt.Sprint(first)}})
	if c == nil {
		t.Fatalf("open: %d", resp.StatusCode)
	}
	select {
	case <-data.running:
	case <-time.After(10 * time.Second):
		t.Fatal("the replay did not start")
	}
	at := ch.apply(t, f)
	c.waitClosed(t, ch.status, at)
}

// lastStreamID is the id of the newest event of the log.
func (f *streamFixture) lastStreamID(t *testing.T) int64 {
	t.Helper()
	var id int64
	if err := f.db.Pool.QueryRow(context.Background(), `SELECT max(id) FROM stream_events`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// waitReadable waits until the log's readers see the event id (a stream
// subscribing then replays up to it).
func (f *streamFixture) waitReadable(t *testing.T, id int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		last, err := f.db.LastStreamPos(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		p, held, err := f.db.StreamPosOf(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if held && !p.After(last) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream event %d not readable after 30 s (held %v at %+v; the log ends at %+v)", id, held, p, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitClosed reads up to the closing event, checks its status and waits
// for the stream to end, logging how long after at it did.
func (c *sseConn) waitClosed(t *testing.T, status int, at time.Time) {
	t.Helper()
	deadline := time.After(time.Until(at.Add(closeDeadline)))
	check := func(ev sseEvent) {
		var got api.StreamClosed
		if err := json.Unmarshal([]byte(ev.Data), &got); err != nil || got.Status != status || got.Detail == "" {
			t.Fatalf("closing event %+v (%v), want status %d with a detail", ev, err, status)
		}
		select {
		case <-c.done:
			t.Logf("stream ended %v after the change", time.Since(at).Round(time.Millisecond))
		case <-deadline:
			t.Fatalf("the stream was still open %v after the change, past its closing event", closeDeadline)
		}
	}
	for {
		select {
		case ev := <-c.events:
			if ev.Event == "closed" {
				check(ev)
				return
			}
		case <-c.done: // every event read is in c.events
			for {
				select {
				case ev := <-c.events:
					if ev.Event == "closed" {
						check(ev)
						return
					}
				default:
					t.Fatal("the stream ended without a closing event")
				}
			}
		case <-deadline:
			t.Fatalf("the stream was still open %v after the change", closeDeadline)
		}
	}
}

// trackedListener hands its connections to the test, which can see
// whether the server's write on one is blocked and whether it was closed.
type trackedListener struct {
	net.Listener
	conns chan *trackedConn
}

func trackConns(l net.Listener) *trackedListener {
	return &trackedListener{Listener: l, conns: make(chan *trackedConn, 16)}
}

func (l *trackedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, closed: make(chan struct{})}
	select {
	case l.conns <- tc:
	default:
	}
	return tc, nil
}

type trackedConn struct {
	net.Conn
	writing   atomic.Int64 // when the pending Write began (unix ns), 0 when none
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *trackedConn) Write(b []byte) (int, error) {
	c.writing.Store(time.Now().UnixNano())
	defer c.writing.Store(0)
	return c.Conn.Write(b)
}

func (c *trackedConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// blocked reports whether a Write has been pending for a while: the
// client's window and the server's send buffer are full.
func (c *trackedConn) blocked() bool {
	began := c.writing.Load()
	return began != 0 && time.Since(time.Unix(0, began)) > 200*time.Millisecond
}

// openUnreadStream sends a stream request over a bare TCP connection with
// a tiny receive buffer, which the test never reads, and returns the
// server's side of it.
func openUnreadStream(t *testing.T, l *trackedListener, addr, key, query, header string) (server *trackedConn) {
	t.Helper()
	client, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if err := client.(*net.TCPConn).SetReadBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(client, "GET /api/v1/public/stream%s HTTP/1.1\r\nHost: marketd\r\nX-API-Key: %s\r\n%s\r\n", query, key, header); err != nil {
		t.Fatal(err)
	}
	select {
	case server = <-l.conns:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not accept the connection")
	}
	return server
}

// waitUntilBlocked calls push until the server's write on conn blocks.
func waitUntilBlocked(t *testing.T, conn *trackedConn, push func()) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !conn.blocked() {
		if time.Now().After(deadline) {
			t.Fatal("the server's writes never blocked on the client that does not read")
		}
		if push != nil {
			push()
		}
		for wait := time.Now().Add(300 * time.Millisecond); time.Now().Before(wait) && !conn.blocked(); {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// waitConnEnded waits for the server to close conn after at (net/http
// closes it as soon as a write fails), then for the stream to end. The
// client cannot tell before it reads what is in flight (with its tiny
// window, slowly): the server's side is the measure.
func waitConnEnded(t *testing.T, r *streamReplica, server *trackedConn, at time.Time) {
	t.Helper()
	end := time.After(time.Until(at.Add(closeDeadline)))
	select {
	case <-server.closed:
		t.Logf("connection closed %v after the change", time.Since(at).Round(time.Millisecond))
	case <-end:
		t.Fatalf("the connection was still open %v after the change", closeDeadline)
	}
	for r.hub.Subscribers() != 0 {
		select {
		case <-end:
			t.Fatalf("the stream's subscription was still open %v after the change", closeDeadline)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func closeWhileBlockedOnASlowReader(t *testing.T, ch keyChange) {
	f := newStreamFixture(t, domain.Business)
	l := (*trackedListener)(nil)
	r := f.replicaWith(t, replicaOptions{listen: func(inner net.Listener) net.Listener { l = trackConns(inner); return l }})
	server := openUnreadStream(t, l, r.srv.Listener.Addr().String(), f.key, "?market=crypto&events=screener", "")
	// Big screener events (a full combination each) until the server's
	// write blocks.
	rows := make([]domain.Ticker, 2000)
	for i := range rows {
		rows[i] = domain.Ticker{Symbol: fmt.Sprintf("S%04d_USDT", i), Price: 1, Volume: 1, UpdatedAt: time.Now().UTC()}
	}
	waitUntilBlocked(t, server, func() {
		if err := f.db.ReplaceTickers(context.Background(), binanceSpot, rows); err != nil {
			t.Fatal(err)
		}
	})
	at := ch.apply(t, f)
	waitConnEnded(t, r, server, at)
}

// A stream replaying a long log (real Postgres) to a client that does not
// read ends soon after its key is revoked.
func TestStreamReplayingToASlowReaderEndsWhenItsKeyIsRevoked(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t, domain.Business)
	f.verdictEvent(t, domain.Crypto, "BTC_USDT")
	first := f.lastStreamID(t)
	// Enough events (about 280 bytes each) to fill any socket buffers.
	if _, err := f.db.Pool.Exec(context.Background(), `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at)
		SELECT 'crypto', 'S' || g || '_USDT', 'neutral', 'growth', 25, clock_timestamp() FROM generate_series(1, 20000) g`); err != nil {
		t.Fatal(err)
	}
	f.waitReadable(t, f.lastStreamID(t)) // all of it is replay material
	l := (*trackedListener)(nil)
	r := f.replicaWith(t, replicaOptions{listen: func(inner net.Listener) net.Listener { l = trackConns(inner); return l }})
	server := openUnreadStream(t, l, r.srv.Listener.Addr().String(), f.key, "?market=crypto&events=verdict_changed",
		fmt.Sprintf("Last-Event-ID: %d\r\n", first))
	waitUntilBlocked(t, server, nil)
	at := keyChanges[0].apply(t, f)
	waitConnEnded(t, r, server, at)
}

// Streams of a client over its cap after Redis lost the count (here the
// client's set deleted) end with a closing 429, until the cap holds.
func TestStreamCapHoldsAfterRedisLosesTheCount(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t, domain.Starter, domain.Crypto) // 2 streams
	ttl := 3 * time.Second                                  // refreshed every second
	a, b := f.replicaWith(t, replicaOptions{slotTTL: ttl}), f.replicaWith(t, replicaOptions{slotTTL: ttl})
	rdb := redistest.Client(t)
	count := f.prefix + "marketd:streams:" + f.clientID
	var streams []*sseConn
	open := func(r *streamReplica) (ok bool) {
		c, resp := openStream(t, r.srv.URL, f.key, "", nil)
		if c == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("open: %d, want 200 or 429", resp.StatusCode)
			}
			return false
		}
		streams = append(streams, c)
		return true
	}
	for range 2 {
		if !open(a) {
			t.Fatal("a stream under the cap was refused")
		}
	}
	// The replica holding both registers them again before it admits one.
	if err := rdb.Del(context.Background(), count).Err(); err != nil {
		t.Fatal(err)
	}
	if open(a) {
		t.Fatal("a third stream of two admitted beside the first two")
	}
	// Another replica cannot know of them (unless a's refresh came first).
	if err := rdb.Del(context.Background(), count).Err(); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range 2 {
		if open(b) {
			admitted++
		}
	}
	t.Logf("the other replica admitted %d", admitted)
	deadline := time.Now().Add(15 * time.Second)
	for aliveStreams(streams) > 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams of a cap of 2 alive after 15 s", aliveStreams(streams))
		}
		time.Sleep(20 * time.Millisecond)
	}
	for end := time.Now().Add(2 * ttl / 3); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if n := aliveStreams(streams); n != 2 {
			t.Fatalf("%d streams alive, want 2", n)
		}
	}
	checkEndedOverTheCap(t, streams, "at most 2 event streams")
}

// aliveStreams counts the streams that have not ended.
func aliveStreams(streams []*sseConn) int {
	n := 0
	for _, c := range streams {
		select {
		case <-c.done:
		default:
			n++
		}
	}
	return n
}

// checkEndedOverTheCap checks that every stream that ended did so with a
// closing 429 stating the cap.
func checkEndedOverTheCap(t *testing.T, streams []*sseConn, detail string) {
	t.Helper()
	for i, c := range streams {
		select {
		case <-c.done:
		default:
			continue
		}
		closed := false
		for len(c.events) > 0 {
			ev := <-c.events
			if ev.Event != "closed" {
				continue
			}
			var got api.StreamClosed
			if err := json.Unmarshal([]byte(ev.Data), &got); err != nil || got.Status != http.StatusTooManyRequests ||
				!strings.Contains(got.Detail, detail) {
				t.Fatalf("stream %d closed with %+v (%v), want 429 stating the cap", i, ev, err)
			}
			closed = true
		}
		if !closed {
			t.Fatalf("stream %d ended without a closing event", i)
		}
	}
}

// Streams a replica admitted while its Redis was away are registered when
// it answers again: the one over the cap ends with a closing 429.
func TestStreamsCountedDuringARedisOutageAreCappedWhenItReturns(t *testing.T) {
	t.Parallel()
	f := newStreamFixture(t, domain.Starter, domain.Crypto) // 2 streams
	var down atomic.Bool
	ttl := 3 * time.Second // refreshed every second
	a := f.replicaWith(t, replicaOptions{slotTTL: ttl, slots: redistest.Flaky(t, &down)})
	b := f.replicaWith(t, replicaOptions{slotTTL: ttl})
	var streams []*sseConn
	open := func(r *streamReplica) {
		t.Helper()
		c, resp := openStream(t, r.srv.URL, f.key, "", nil)
		if c == nil {
			t.Fatalf("open: %d, want 200", resp.StatusCode)
		}
		streams = append(streams, c)
	}
	down.Store(true)
	open(a) // counted by a alone
	open(a)
	open(b) // counted in Redis
	down.Store(false)
	deadline := time.Now().Add(15 * time.Second)
	for aliveStreams(streams) > 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams of a cap of 2 alive 15 s after Redis returned", aliveStreams(streams))
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-streams[1].done: // a's youngest found the cap full
	default:
		t.Fatalf("alive: %d; want a's second stream ended", aliveStreams(streams))
	}
	checkEndedOverTheCap(t, streams, "at most 2 event streams")
	if n, err := stream.NewSlots(redistest.Client(t), f.prefix, 0, nil).Open(context.Background(), f.clientID); err != nil || n != 2 {
		t.Fatalf("open slots %d (%v), want 2", n, err)
	}
}
