package rediskeys_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/rediskeys"
)

// A deployment's Redis URL with a Sentinel reaches the primary the
// sentinel names, for go-redis and asynq alike, and follows it when the
// primary is SIGKILLed and the sentinel promotes the replica: real
// redis-server processes (a primary, a replica, a sentinel: redis-server
// --sentinel), on ports of their own, beside whatever else the machine
// runs. The URL's own host is never dialled (port 1 answers nothing).
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is needed (Debian's redis-server package, as CI installs): %v", err)
	}
	dir := t.TempDir()
	primaryPort, replicaPort, sentinelPort := freePort(t), freePort(t), freePort(t)
	primary := startRedis(t, bin, dir, "primary", "--port", strconv.Itoa(primaryPort))
	startRedis(t, bin, dir, "replica", "--port", strconv.Itoa(replicaPort), "--replicaof", "127.0.0.1", strconv.Itoa(primaryPort))
	conf := filepath.Join(dir, "sentinel.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`port %d
bind 127.0.0.1
dir %s
sentinel monitor m 127.0.0.1 %d 1
sentinel down-after-milliseconds m 1000
sentinel failover-timeout m 10000
`, sentinelPort, dir, primaryPort)), 0o600); err != nil {
		t.Fatal(err)
	}
	startRedis(t, bin, dir, "sentinel", conf, "--sentinel")

	ctx := t.Context()
	replica := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", replicaPort)})
	defer replica.Close()
	waitFor(t, 30*time.Second, func() string {
		info, err := replica.Info(ctx, "replication").Result()
		if err != nil || !strings.Contains(info, "master_link_status:up") {
			return fmt.Sprintf("replica not in sync: %v %s", err, info)
		}
		return ""
	})

	url, err := rediskeys.WithSentinel("redis://127.0.0.1:1/3", rediskeys.Sentinel{
		Addrs: []string{fmt.Sprintf("127.0.0.1:%d", sentinelPort)}, Master: "m"})
	if err != nil {
		t.Fatal(err)
	}
	opts, err := rediskeys.BackgroundClientOptions(url)
	if err != nil {
		t.Fatal(err)
	}
	if opts.DB != 3 {
		t.Fatalf("database %d, want the URL's 3", opts.DB)
	}
	rdb := opts.NewClient()
	defer rdb.Close()
	waitFor(t, 30*time.Second, func() string { // the sentinel learns of the primary
		if err := rdb.Set(ctx, "k", "before", 0).Err(); err != nil {
			return "set through the sentinel: " + err.Error()
		}
		return ""
	})
	if port := serverPort(t, rdb); port != primaryPort {
		t.Fatalf("connected to port %d, want the primary's %d", port, primaryPort)
	}
	aopt, err := rediskeys.AsynqOpt(url)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := aopt.(asynq.RedisFailoverClientOpt); !ok {
		t.Fatalf("asynq connects with %T, want asynq.RedisFailoverClientOpt", aopt)
	}
	queue := asynq.NewClient(aopt)
	defer queue.Close()
	if _, err := queue.EnqueueContext(ctx, asynq.NewTask("t", []byte("before")), asynq.Queue("q")); err != nil {
		t.Fatal(err)
	}
	// Both writes are on the replica before the primary dies.
	if err := rdb.Do(ctx, "WAIT", 1, 5000).Err(); err != nil {
		t.Fatal(err)
	}

	if err := primary.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	waitFor(t, 60*time.Second, func() string {
		if err := rdb.Set(ctx, "k2", "after", 0).Err(); err != nil {
			return "set after the failover: " + err.Error()
		}
		return ""
	})
	t.Logf("writes resumed %.1fs after the primary was killed", time.Since(began).Seconds())
	if port := serverPort(t, rdb); port != replicaPort {
		t.Fatalf("after the failover connected to port %d, want the promoted replica's %d", port, replicaPort)
	}
	if v, err := rdb.Get(ctx, "k").Result(); err != nil || v != "before" {
		t.Fatalf("a key written before the failover: %q, %v", v, err)
	}
	waitFor(t, 30*time.Second, func() string {
		if _, err := queue.EnqueueContext(ctx, asynq.NewTask("t", []byte("after")), asynq.Queue("q")); err != nil {
			return "asynq enqueue after the failover: " + err.Error()
		}
		return ""
	})
	ins := asynq.NewInspector(aopt)
	defer ins.Close()
	info, err := ins.GetQueueInfo("q")
	if err != nil {
		t.Fatal(err)
	}
	if info.Pending != 2 {
		t.Fatalf("queue holds %d pending tasks after the failover, want both", info.Pending)
	}
}

// The Sentinel parameters round-trip through the URL, and are refused
// without the primary's name or with an address that is not host:port.
func TestWithSentinel(t *testing.T) {
	t.Parallel()
	plain, err := rediskeys.WithSentinel("redis://u:p@h:6379/2", rediskeys.Sentinel{})
	if err != nil || plain != "redis://u:p@h:6379/2" {
		t.Fatalf("no sentinel: %q, %v", plain, err)
	}
	url, err := rediskeys.WithSentinel("rediss://u:p@h:6379/2", rediskeys.Sentinel{Addrs: []string{"a:26379", "b:26379"}, Master: "mm", Password: "sp"})
	if err != nil {
		t.Fatal(err)
	}
	o, err := rediskeys.ClientOptions(url)
	if err != nil {
		t.Fatal(err)
	}
	if o.Username != "u" || o.Password != "p" || o.DB != 2 || o.TLSConfig == nil ||
		strings.Join(o.Sentinel.Addrs, ",") != "a:26379,b:26379" || o.Sentinel.Master != "mm" || o.Sentinel.Password != "sp" {
		t.Fatalf("parsed %+v sentinel %+v", o.Options, o.Sentinel)
	}
	if _, err := rediskeys.WithSentinel("redis://h/0", rediskeys.Sentinel{Addrs: []string{"a:26379"}}); err == nil {
		t.Fatal("sentinels without a primary's name accepted")
	}
	if _, err := rediskeys.WithSentinel("redis://h/0", rediskeys.Sentinel{Addrs: []string{"a"}, Master: "m"}); err == nil {
		t.Fatal("a sentinel address without a port accepted")
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startRedis runs redis-server with args (no persistence), until the test
// ends, and waits until it answers.
func startRedis(t *testing.T, bin, dir, name string, args ...string) *exec.Cmd {
	t.Helper()
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	args = append(args, "--save", "", "--appendonly", "no", "--bind", "127.0.0.1", "--dir", dir)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s log:\n%s", name, b)
		}
	})
	port := ""
	for i, a := range args {
		if a == "--port" {
			port = args[i+1]
		}
	}
	if port == "" { // the sentinel's port is in its file
		b, _ := os.ReadFile(args[0])
		port = strings.Fields(strings.SplitN(string(b), "\n", 2)[0])[1]
	}
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})
	defer c.Close()
	waitFor(t, 15*time.Second, func() string {
		if err := c.Ping(context.Background()).Err(); err != nil {
			return name + " does not answer: " + err.Error()
		}
		return ""
	})
	return cmd
}

// serverPort is the port of the server rdb's connections reach.
func serverPort(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "tcp_port:"); ok {
			p, _ := strconv.Atoi(v)
			return p
		}
	}
	t.Fatalf("no tcp_port in INFO server: %s", info)
	return 0
}

// waitFor polls cond until it returns "" or the deadline passes.
func waitFor(t *testing.T, d time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
