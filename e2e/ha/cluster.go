package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// proc is one process of the harness: a command it can start, SIGKILL,
// stop (SIGTERM) and start again with the same arguments.
type proc struct {
	name string
	bin  string
	args []string
	env  []string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *proc) start() error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", p.name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); f.Close(); close(done) }(p.done)
	return nil
}

func (p *proc) signal(sig syscall.Signal, wait time.Duration) {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(wait):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
}

func (p *proc) kill() { p.signal(syscall.SIGKILL, 10*time.Second) }
func (p *proc) stop() { p.signal(syscall.SIGTERM, 30*time.Second) }

// ports hands out free ports of the 27000-27999 range, away from the
// machine's Postgres and Redis and other test runs' random ports.
type ports struct{ next int }

func (p *ports) get() int {
	for ; p.next < 28000; p.next++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p.next))
		if err == nil {
			l.Close()
			p.next++
			return p.next - 1
		}
	}
	panic("no free port in 27000-27999")
}

func waitFor(d time.Duration, what string, cond func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s: %w", what, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pgCluster is a Postgres cluster of the harness's own, run as the
// postgres user (initdb refuses root).
type pgCluster struct {
	bin, dir string
	port     int
}

func newPG(parent, name string, port, from int) (*pgCluster, error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		return nil, fmt.Errorf("no Postgres server binaries under /usr/lib/postgresql")
	}
	c := &pgCluster{bin: filepath.Dir(bins[len(bins)-1]), dir: filepath.Join(parent, name), port: port}
	if err := os.Mkdir(c.dir, 0o700); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		pg, err := user.Lookup("postgres")
		if err != nil {
			return nil, err
		}
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		if err := os.Chown(c.dir, uid, gid); err != nil {
			return nil, err
		}
	}
	var err error
	if from == 0 {
		err = c.run("initdb", "-D", c.dir, "-U", "postgres", "--auth=trust", "-N")
	} else {
		err = c.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(from), "-U", "postgres", "-D", c.dir, "-R", "-X", "stream")
	}
	if err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("\nport = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nfsync = off\nshared_buffers = 64MB\nmax_connections = 200\nmax_wal_senders = 4\nwal_level = replica\nhot_standby = on\n", port, c.dir)
	f, err := os.OpenFile(filepath.Join(c.dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, _ = f.WriteString(conf)
	f.Close()
	return c, c.run("pg_ctl", "-D", c.dir, "start", "-w", "-l", filepath.Join(c.dir, "log"))
}

func (c *pgCluster) run(prog string, args ...string) error {
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(c.bin, prog)}, args...)...)
	} else {
		cmd = exec.Command(filepath.Join(c.bin, prog), args...)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", prog, strings.Join(args, " "), err, out)
	}
	return nil
}

func (c *pgCluster) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// postmasterPID is the server's process id, from its pid file.
func (c *pgCluster) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.dir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
}

// sigkill SIGKILLs the postmaster (its backends exit when it is gone).
func (c *pgCluster) sigkill() error {
	pid, err := c.postmasterPID()
	if err != nil {
		return err
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

func (c *pgCluster) stopImmediate() { _ = c.run("pg_ctl", "-D", c.dir, "stop", "-m", "immediate") }

func (c *pgCluster) exec(ctx context.Context, q string) error {
	conn, err := pgx.Connect(ctx, c.url())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, q)
	return err
}

// redisSet is a Redis primary, its replica and three sentinels.
type redisSet struct {
	nodes     [2]*proc
	nodePorts [2]int
	sentinels []*proc
	sentPorts []int
}

const sentinelMaster = "hamaster"

func newRedisSet(dir string, pp *ports) (*redisSet, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, err
	}
	sbin, err := exec.LookPath("redis-sentinel")
	if err != nil {
		return nil, err
	}
	rs := &redisSet{}
	for i := range rs.nodes {
		rs.nodePorts[i] = pp.get()
	}
	for i := range rs.nodes {
		nd := filepath.Join(dir, fmt.Sprintf("redis%d", i))
		_ = os.MkdirAll(nd, 0o755)
		conf := filepath.Join(nd, "redis.conf")
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsave \"\"\nappendonly no\n", rs.nodePorts[i], nd)
		if i == 1 {
			body += fmt.Sprintf("replicaof 127.0.0.1 %d\n", rs.nodePorts[0])
		}
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			return nil, err
		}
		p := &proc{name: fmt.Sprintf("redis%d", i), bin: bin, args: []string{conf}, log: filepath.Join(dir, fmt.Sprintf("redis%d.log", i))}
		if err := p.start(); err != nil {
			return nil, err
		}
		rs.nodes[i] = p
	}
	for i := range 3 {
		port := pp.get()
		sd := filepath.Join(dir, fmt.Sprintf("sentinel%d", i))
		_ = os.MkdirAll(sd, 0o755)
		conf := filepath.Join(sd, "sentinel.conf")
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %d 2\nsentinel down-after-milliseconds %s 2000\nsentinel failover-timeout %s 10000\nsentinel parallel-syncs %s 1\n",
			port, sd, sentinelMaster, rs.nodePorts[0], sentinelMaster, sentinelMaster, sentinelMaster)
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			return nil, err
		}
		p := &proc{name: fmt.Sprintf("sentinel%d", i), bin: sbin, args: []string{conf}, log: filepath.Join(dir, fmt.Sprintf("sentinel%d.log", i))}
		if err := p.start(); err != nil {
			return nil, err
		}
		rs.sentinels = append(rs.sentinels, p)
		rs.sentPorts = append(rs.sentPorts, port)
	}
	// The replica in sync, every sentinel seeing it.
	err = waitFor(30*time.Second, "redis replica in sync", func() error {
		c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", rs.nodePorts[1])})
		defer c.Close()
		info, err := c.Info(context.Background(), "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("link down")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rs, waitFor(30*time.Second, "sentinels agree", func() error {
		for _, p := range rs.sentPorts {
			c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", p)})
			n, err := c.Do(context.Background(), "SENTINEL", "replicas", sentinelMaster).Slice()
			c.Close()
			if err != nil || len(n) == 0 {
				return fmt.Errorf("sentinel %d: replicas %v %v", p, n, err)
			}
		}
		return nil
	})
}

func (rs *redisSet) sentinelAddrs() string {
	var a []string
	for _, p := range rs.sentPorts {
		a = append(a, fmt.Sprintf("127.0.0.1:%d", p))
	}
	return strings.Join(a, ",")
}

// primary is the index of the node the sentinels name.
func (rs *redisSet) primary() (int, error) {
	for _, sp := range rs.sentPorts {
		c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", sp)})
		addr, err := c.Do(context.Background(), "SENTINEL", "get-master-addr-by-name", sentinelMaster).StringSlice()
		c.Close()
		if err != nil || len(addr) != 2 {
			continue
		}
		for i, p := range rs.nodePorts {
			if strconv.Itoa(p) == addr[1] {
				return i, nil
			}
		}
	}
	return -1, fmt.Errorf("no sentinel names a primary")
}

func (rs *redisSet) stopAll() {
	for _, p := range rs.sentinels {
		p.kill()
	}
	for _, p := range rs.nodes {
		p.kill()
	}
}

// haproxy fronts the api replicas: health checks on their ops port's
// /readyz, and a retry on another server when a connection fails.
func haproxyConfig(front int, apis [][2]int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `global
  maxconn 4096
defaults
  mode http
  timeout connect 1s
  timeout client 120s
  timeout server 120s
  timeout tunnel 1h
  retries 3
  option redispatch 1
  retry-on conn-failure empty-response
frontend fe
  bind 127.0.0.1:%d
  default_backend api
backend api
  balance leastconn
  option httpchk GET /readyz
  http-check expect status 200
`, front)
	for i, a := range apis {
		fmt.Fprintf(&b, "  server api%d 127.0.0.1:%d check port %d inter 500 fall 2 rise 2\n", i, a[0], a[1])
	}
	return b.String()
}

func httpOK(url string) error {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: %d", url, resp.StatusCode)
	}
	return nil
}

// writeCert makes the webhook receiver's self-signed certificate for
// 127.0.0.1 (cert.pem, key.pem); the workers trust it as their CA file.
func writeCert(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "marketd-ha webhook receiver"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}), 0o600)
}
