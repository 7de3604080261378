package store_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/store"
)

// A multi-host MARKET_DATABASE_URL with target_session_attrs=read-write
// follows a failover: two real Postgres clusters of the test's own (a
// primary and its streaming replica, on ports of their own, beside the
// machine's server), the primary turned read-only and the replica
// promoted. The pool's connections to the former primary are dropped at
// the first write it refuses (SQLSTATE 25006), writes resume on the new
// primary, and the notification listener moves there too (a NOTIFY
// committed on the new primary wakes it).
func TestFailoverToPromotedReplica(t *testing.T) {
	t.Parallel()
	primary := newCluster(t, "primary", "")
	replica := newCluster(t, "replica", primary.port)
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%s,127.0.0.1:%s/postgres?sslmode=disable&target_session_attrs=read-write",
		primary.port, replica.port)
	ctx := t.Context()
	db, err := store.Open(ctx, url, store.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store.SetListenCheckEvery(db, 500*time.Millisecond)
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE writes (n int)`); err != nil {
		t.Fatal(err)
	}
	write := func() (string, error) {
		var port int
		err := db.Pool.QueryRow(ctx, `INSERT INTO writes VALUES (1) RETURNING inet_server_port()`).Scan(&port)
		return strconv.Itoa(port), err
	}
	// Every pooled connection is opened (on the primary).
	conns := make([]pgxConn, 0, 4)
	for range 4 {
		c, err := db.Pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	if port, err := write(); err != nil || port != primary.port {
		t.Fatalf("first write: port %s, %v", port, err)
	}

	var wakes atomic.Int64
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = db.ListenStream(lctx, func() { wakes.Add(1) }) }()
	waitUntil(t, 10*time.Second, func() bool { return wakes.Load() > 0 }) // connected

	// The failover: the former primary stays up, read-only; the replica
	// is promoted.
	primary.sql(t, `ALTER SYSTEM SET default_transaction_read_only = on`)
	primary.sql(t, `SELECT pg_reload_conf()`)
	replica.pgctl(t, "promote", "-w")
	began := time.Now()
	refused := 0
	waitUntil(t, 30*time.Second, func() bool {
		port, err := write()
		if err != nil {
			if store.IsReadOnly(err) {
				refused++
			}
			return false
		}
		if port != replica.port {
			t.Fatalf("a write after the failover went to port %s, want the promoted replica's %s", port, replica.port)
		}
		return true
	})
	t.Logf("writes back on the promoted replica %.1fs after the promotion (%d refused as read-only first)", time.Since(began).Seconds(), refused)
	if refused == 0 {
		t.Error("no write was refused as read-only: the test did not exercise the former primary's connections")
	}

	// The listener reconnects to the new primary: a NOTIFY there wakes it.
	channel := "public.stream_events"
	before := wakes.Load()
	waitUntil(t, 30*time.Second, func() bool {
		replica.sql(t, fmt.Sprintf(`NOTIFY %s`, pgx.Identifier{channel}.Sanitize()))
		return wakes.Load() > before+1 // the reconnect's own wake, and a notification
	})
}

type pgxConn = interface{ Release() }

type cluster struct {
	bin, dir, port string
}

// newCluster makes and starts a Postgres cluster of the test's own as the
// postgres user (initdb refuses root): a primary, or a streaming replica
// of the cluster on port from.
func newCluster(t *testing.T, name, from string) *cluster {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		t.Fatal("no Postgres server binaries under /usr/lib/postgresql (Debian's postgresql package)")
	}
	bin := filepath.Dir(bins[len(bins)-1])
	parent, err := os.MkdirTemp("", "marketd-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	pg, err := user.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	c := &cluster{bin: bin, dir: dir, port: strconv.Itoa(freeTCPPort(t))}
	if from == "" {
		c.run(t, "initdb", "-D", dir, "-U", "postgres", "--auth=trust", "-N")
	} else {
		c.run(t, "pg_basebackup", "-h", "127.0.0.1", "-p", from, "-U", "postgres", "-D", dir, "-R", "-X", "stream")
	}
	conf := fmt.Sprintf("\nport = %s\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nfsync = off\nshared_buffers = 16MB\nmax_wal_senders = 4\nwal_level = replica\nhot_standby = on\n", c.port, dir)
	f, err := os.OpenFile(filepath.Join(dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(conf)
	_ = f.Close()
	c.pgctl(t, "start", "-w", "-l", filepath.Join(dir, "log"))
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Logf("%s log:\n%s", name, b)
		}
		_ = exec.Command("runuser", "-u", "postgres", "--", filepath.Join(bin, "pg_ctl"), "-D", dir, "stop", "-m", "immediate").Run()
	})
	return c
}

func (c *cluster) run(t *testing.T, prog string, args ...string) {
	t.Helper()
	out, err := exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(c.bin, prog)}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", prog, strings.Join(args, " "), err, out)
	}
}

func (c *cluster) pgctl(t *testing.T, args ...string) {
	t.Helper()
	c.run(t, "pg_ctl", append([]string{"-D", c.dir}, args...)...)
}

func (c *cluster) sql(t *testing.T, q string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), "postgres://postgres@127.0.0.1:"+c.port+"/postgres?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitUntil(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The api's reads go to a streaming replica while its measured lag is
// within the bound, to the primary while its replay is paused and the
// primary has written since, back to the replica once it catches up, and
// stay on the replica when the primary dies.
func TestReadRouterFollowsReplicaLag(t *testing.T) {
	t.Parallel()
	primary := newCluster(t, "primary", "")
	replica := newCluster(t, "replica", primary.port)
	ctx := t.Context()
	open := func(c *cluster) *store.DB {
		db, err := store.Open(ctx, "postgres://postgres@127.0.0.1:"+c.port+"/postgres?sslmode=disable", store.Options{MaxConns: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		return db
	}
	pdb, rdb := open(primary), open(replica)
	r := store.NewReadRouter(pdb, rdb, time.Second)
	onReplica := func() bool {
		before, _ := r.Routed()
		_, _ = r.CandleSymbols(ctx, "crypto", "binance", "1h") // any read: the table may not exist
		after, _ := r.Routed()
		return after == before
	}
	if onReplica() {
		t.Fatal("reads went to the replica before any lag was measured")
	}
	probe := func() { r.Probe(ctx); time.Sleep(20 * time.Millisecond) }
	waitUntil(t, 15*time.Second, func() bool { probe(); return onReplica() })

	replica.sql(t, `SELECT pg_wal_replay_pause()`)
	primary.sql(t, `CREATE TABLE moved (n int)`) // the primary's position moves past the replica's
	waitUntil(t, 15*time.Second, func() bool { probe(); return !onReplica() })
	if lag, ok := r.Lag(); !ok || lag <= time.Second {
		t.Errorf("lag %s (known %v) while reads went to the primary, want > 1s", lag, ok)
	}
	replica.sql(t, `SELECT pg_wal_replay_resume()`)
	waitUntil(t, 15*time.Second, func() bool { probe(); return onReplica() })

	primary.pgctl(t, "stop", "-m", "immediate")
	for range 5 {
		probe()
		if !onReplica() {
			t.Fatal("reads left the replica when the primary died")
		}
	}
}
