package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"

	"github.com/marketscreener/market/cmd/marketd/app"
	"github.com/marketscreener/market/redistest"
	"github.com/marketscreener/market/store/storetest"
)

// The images of the testcontainers path, the ones compose.yaml runs.
const (
	postgresImage = "postgres:16-alpine"
	redisImage    = "redis:7-alpine"
)

var (
	// onContainers is true when the suite runs on testcontainers.
	onContainers bool
	// dockerVersion is the engine's, once one answered.
	dockerVersion string
)

// TestMain runs the suite on Postgres and Redis containers when a Docker
// engine answers and has (or can pull) the images, and on the local
// services otherwise. Its first line says which, and why.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	path, docker := choosePath(ctx)
	announce("e2e: " + path)
	if docker {
		dbURL, redisURL, stop, err := startContainers(ctx, map[string]string{"market.e2e": "suite"})
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", oneLine(err))
			return 1
		}
		defer stop()
		os.Setenv("MARKET_TEST_DATABASE_URL", dbURL)
		os.Setenv("MARKET_TEST_REDIS_URL", redisURL)
		onContainers = true
	}
	return m.Run()
}

// announce prints the suite's first line, and also writes it to the file
// named by MARKET_E2E_REPORT (make test shows it: go test hides the output
// of a passing package).
func announce(line string) {
	fmt.Fprintln(os.Stderr, line)
	if f := os.Getenv("MARKET_E2E_REPORT"); f != "" {
		_ = os.WriteFile(f, []byte(line+"\n"), 0o644)
	}
}

// choosePath picks containers or the local services, and says why.
func choosePath(ctx context.Context) (path string, docker bool) {
	if os.Getenv("MARKET_E2E_NO_DOCKER") != "" {
		return "local Postgres and Redis (MARKET_E2E_NO_DOCKER is set)", false
	}
	containerDefaults()
	// testcontainers' banner would come before this suite's first line.
	logger := tclog.Default()
	tclog.SetDefault(tclog.NewNoopLogger())
	defer tclog.SetDefault(logger)
	if why := dockerUnavailable(ctx, postgresImage, redisImage); why != "" {
		return "local Postgres and Redis (" + why + ")", false
	}
	return fmt.Sprintf("testcontainers (%s, %s; Docker %s)", postgresImage, redisImage, dockerVersion), true
}

// containerDefaults sets what testcontainers needs on a machine like CI's
// unless the caller chose: Ryuk (the reaper) off, since the suite removes
// its containers itself and the Ryuk image may not be had; and, for a local
// engine, published ports on localhost (inside a container, /.dockerenv
// makes testcontainers guess the bridge gateway instead).
func containerDefaults() {
	if _, set := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !set {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	if _, set := os.LookupEnv("TESTCONTAINERS_HOST_OVERRIDE"); !set {
		if h := os.Getenv("DOCKER_HOST"); h == "" || strings.HasPrefix(h, "unix://") {
			os.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "localhost")
		}
	}
}

// dockerUnavailable says why the containers cannot be had ("" when they
// can): no engine answers, or an image is neither present nor pullable.
func dockerUnavailable(ctx context.Context, images ...string) string {
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		return "no Docker engine: " + oneLine(err)
	}
	defer p.Close()
	cli := p.Client()
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := cli.Info(ictx, client.InfoOptions{})
	if err != nil {
		return "no Docker engine answers"
	}
	dockerVersion = info.Info.ServerVersion
	for _, img := range images {
		if _, err := cli.ImageInspect(ctx, img); err == nil {
			continue
		}
		// One attempt, bounded: a registry that does not answer must not
		// hold the suite up (.ci/docker-images builds stand-ins instead).
		pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		resp, err := cli.ImagePull(pctx, img, client.ImagePullOptions{})
		if err == nil {
			err = resp.Wait(pctx)
		}
		cancel()
		if _, ierr := cli.ImageInspect(ctx, img); ierr != nil {
			if err == nil {
				err = ierr
			}
			return fmt.Sprintf("Docker has no %s and cannot pull it: %s", img, oneLine(err))
		}
	}
	return ""
}

// startContainers starts Postgres and Redis with labels; on any failure
// it removes what it started before returning the error. stop removes both.
func startContainers(ctx context.Context, labels map[string]string, pgOpts ...testcontainers.ContainerCustomizer) (dbURL, redisURL string, stop func(), err error) {
	var started []testcontainers.Container
	stop = func() {
		for _, c := range started {
			if err := testcontainers.TerminateContainer(c); err != nil {
				fmt.Fprintln(os.Stderr, "e2e: removing a container:", oneLine(err))
			}
		}
		started = nil
	}
	opts := append([]testcontainers.ContainerCustomizer{tcpostgres.WithDatabase("test"),
		tcpostgres.WithUsername("postgres"), tcpostgres.WithPassword("postgres"), tcpostgres.BasicWaitStrategies(),
		testcontainers.WithLabels(labels)}, pgOpts...)
	pg, err := tcpostgres.Run(ctx, postgresImage, opts...)
	started = append(started, pg) // also on error: a container that failed to start may exist
	if err != nil {
		stop()
		return "", "", nil, fmt.Errorf("postgres container: %w", err)
	}
	rd, err := tcredis.Run(ctx, redisImage, testcontainers.WithLabels(labels))
	started = append(started, rd)
	if err != nil {
		stop()
		return "", "", nil, fmt.Errorf("redis container: %w", err)
	}
	if dbURL, err = pg.ConnectionString(ctx, "sslmode=disable"); err == nil {
		redisURL, err = rd.ConnectionString(ctx)
	}
	if err != nil {
		stop()
		return "", "", nil, err
	}
	return dbURL, strings.TrimRight(redisURL, "/") + "/15", stop, nil
}

func oneLine(err error) string { return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ") }

// deployment is one marketd environment: its own schema and Redis database.
type deployment struct {
	t   *testing.T
	env map[string]string
}

func newDeployment(t *testing.T, extra map[string]string) *deployment {
	t.Helper()
	env := map[string]string{
		"MARKET_DATABASE_URL":    storetest.URLWithSchema(storetest.CreateSchema(t)),
		"MARKET_REDIS_URL":       redistest.LeaseDB(t),
		"MARKET_HTTP_ADDR":       "127.0.0.1:0",
		"MARKET_OPS_ADDR":        "127.0.0.1:0",
		"MARKET_LOG_LEVEL":       "warn",
		"MARKET_TICKER_INTERVAL": "2s",
		"MARKET_CANDLE_INTERVAL": "30s",
		"MARKET_SCORE_INTERVAL":  "5s",
		// The statistics backtest replays the scorer over every asset's
		// daily history: seconds of CPU, minutes under -race. It is tested
		// in worker and api; the deployments here leave it off.
		"MARKET_STATS_INTERVAL": "0",
	}
	if l := os.Getenv("E2E_LOG_LEVEL"); l != "" {
		env["MARKET_LOG_LEVEL"] = l // a failing deployment test's log, in more detail
	}
	for k, v := range extra {
		env[k] = v
	}
	d := &deployment{t: t, env: env}
	d.cli("migrate")
	return d
}

func (d *deployment) cli(args ...string) string {
	d.t.Helper()
	var out, errb bytes.Buffer
	m := &app.Main{Getenv: func(k string) string { return d.env[k] }, Stdout: &out, Stderr: &errb}
	if code := m.Run(context.Background(), args); code != 0 {
		d.t.Fatalf("marketd %v: exit %d: %s", args, code, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// stopWithin bounds a role's graceful stop: the grace the Helm chart gives
// the worker (terminationGracePeriodSeconds: 45). A stop waits for the
// running tasks up to asynq's ShutdownTimeout (20 s) and drains HTTP for up
// to 15 s beside it; on a loaded host a task's own end comes on top.
const stopWithin = 45 * time.Second

// start runs a serving role until the test ends and returns its public base URL.
func (d *deployment) start(role string) (base, ops string) {
	d.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var errb lockedBuffer
	m := &app.Main{Getenv: func(k string) string { return d.env[k] }, Stdout: io.Discard, Stderr: &errb}
	done := make(chan int, 1)
	go func() { done <- m.Run(ctx, []string{role}) }()
	d.t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				d.t.Errorf("marketd %s exited %d: %s", role, code, errb.String())
			} else if d.t.Failed() || os.Getenv("E2E_SHOW_LOG") != "" {
				d.t.Logf("marketd %s log:\n%s", role, errb.String())
			}
		case <-time.After(stopWithin):
			// What it was still doing: its log and every goroutine's stack
			// (the role runs in this process).
			var stacks strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
			d.t.Errorf("marketd %s did not stop within %s; its log:\n%s\ngoroutines:\n%s", role, stopWithin, errb.String(), stacks.String())
		}
	})
	select {
	case <-m.Listening():
	case code := <-done:
		d.t.Fatalf("marketd %s exited %d: %s", role, code, errb.String())
	}
	ops = "http://" + m.OpsAddr()
	poll(d.t, 15*time.Second, func() string {
		resp, err := http.Get(ops + "/readyz")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "readyz: " + resp.Status
		}
		return ""
	})
	if m.HTTPAddr() == "" {
		return "", ops
	}
	return "http://" + m.HTTPAddr() + "/api/v1/public", ops
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// getJSON GETs url with key and decodes the body into out (if non-nil).
func getJSON(t *testing.T, url, key string, out any) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusTooManyRequests {
		// No test here means to reach a limit: a 429 is the test's own
		// polling spending its key, and would turn later checks flaky.
		t.Fatalf("GET %s: 429 %s: the test spent its key's limit", url, body)
	}
	if resp.StatusCode != http.StatusOK {
		var problem map[string]any
		_ = json.Unmarshal(body, &problem)
		return resp.StatusCode, problem
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("GET %s: %v in %q", url, err, body)
		}
	}
	return resp.StatusCode, nil
}

// poll retries f until it returns "" or the timeout passes, and fails with
// f's last complaint. The interval grows from 100 ms to 2 s: a poll through
// the public API spends the test key's rate limit (600/minute for the demo
// key), and a tight loop of several requests a round would spend it.
func poll(t *testing.T, timeout time.Duration, f func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	interval := 100 * time.Millisecond
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, msg)
		}
		time.Sleep(interval)
		interval = min(interval*3/2, 2*time.Second)
	}
}
