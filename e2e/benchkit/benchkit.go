// Package benchkit holds what the benchmark commands under e2e/cmd share:
// a Redis database leased as the tests lease one (redistest), SQL on the
// benchmark's own schema, marketd's CLI run with the benchmark's
// environment, a process's CPU time, and percentiles.
package benchkit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// ProcCPU is the CPU time (user + system) of process pid so far, from
// /proc/<pid>/stat (Linux; ticks of 10 ms).
func ProcCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after "pid (comm) "
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// leaseRedisDB takes one of the databases the tests lease (redistest: a
// SETNX lock per database in the shared one), flushes it and returns its
// URL and the release.
// LeaseRedisDB leases one of the Redis databases 1–12 of the server at
// shared for ttl, under the same lock keys as redistest, so a benchmark
// never shares a database with a test; release flushes and frees it.
func LeaseRedisDB(ctx context.Context, shared string, ttl time.Duration) (string, func(), error) {
	opts, err := redis.ParseURL(shared)
	if err != nil {
		return "", nil, err
	}
	rdb := redis.NewClient(opts)
	token := RandomHex(8)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		for n := 1; n <= 12; n++ {
			lock := fmt.Sprintf("redistest:db-lease:%d", n)
			ok, err := rdb.SetNX(ctx, lock, token, ttl).Result()
			if err != nil {
				rdb.Close()
				return "", nil, err
			}
			if !ok {
				continue
			}
			o := *opts
			o.DB = n
			db := redis.NewClient(&o)
			_ = db.FlushDB(ctx).Err()
			release := func() {
				_ = db.FlushDB(context.Background()).Err()
				db.Close()
				const script = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`
				_ = rdb.Eval(context.Background(), script, []string{lock}, token).Err()
				rdb.Close()
			}
			return fmt.Sprintf("redis://%s/%d", o.Addr, n), release, nil
		}
		if time.Now().After(deadline) {
			rdb.Close()
			return "", nil, errors.New("no Redis database free to lease (1-12)")
		}
		time.Sleep(time.Second)
	}
}

// ExecSQL runs one statement on databaseURL.
func ExecSQL(ctx context.Context, databaseURL, sql string) error {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// RandomHex is n random bytes in hex (schema names, secrets).
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Pct is the p-th percentile (0–1, nearest rank) of ds; 0 for none.
func Pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Dist renders p50 / p95 / max in seconds and the sample count.
func Dist(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no samples"
	}
	r := func(d time.Duration) string {
		if d < 10*time.Second {
			return strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
		}
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64)
	}
	return fmt.Sprintf("%s / %s / %s s (n=%d)", r(Pct(ds, 0.5)), r(Pct(ds, 0.95)), r(slices.Max(ds)), len(ds))
}

// Environ is a marketd process's environment: PATH and HOME, and vars.
func Environ(vars map[string]string) []string {
	out := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	return out
}

// CLI runs the marketd binary bin with args in the environment of vars and
// returns its trimmed standard output; an error carries its standard error.
func CLI(vars map[string]string, bin string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = Environ(vars)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("marketd %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// EnvFlag is a repeatable MARKET_NAME=value flag: settings added to a
// marketd process's environment.
type EnvFlag map[string]string

func (f *EnvFlag) String() string { return strings.Join(f.Pairs(), " ") }

// Set adds one MARKET_NAME=value.
func (f *EnvFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || !strings.HasPrefix(k, "MARKET_") {
		return fmt.Errorf("want MARKET_NAME=value, got %q", s)
	}
	if *f == nil {
		*f = EnvFlag{}
	}
	(*f)[k] = v
	return nil
}

// Pairs lists the settings as sorted NAME=value strings.
func (f EnvFlag) Pairs() []string {
	out := make([]string, 0, len(f))
	for k, v := range f {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}
