package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/marketscreener/market/cmd/marketd/app"
	"github.com/marketscreener/market/domain"
)

// server is a target running as a child process.
type server struct {
	name   string
	base   string // http://host:port
	cmd    *exec.Cmd
	stderr *lockedBuffer
	exited chan struct{}
}

// serverCore is the core the servers are pinned to, wrkCore the generator's.
func serverCore() int { return runtime.NumCPU() - 1 }

const wrkCore = 0

// pinned prefixes argv with taskset when pinning is on.
func pinned(o options, core int, argv ...string) []string {
	if !o.pin {
		return argv
	}
	return append([]string{"taskset", "-c", strconv.Itoa(core)}, argv...)
}

// startAPI starts marketd api (this tool's build, or bin) and waits until
// /readyz answers 200; profile, for this build, is where its CPU profile goes.
func startAPI(ctx context.Context, o options, vars map[string]string, bin, profile, name string) (*server, error) {
	httpAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	opsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	var argv []string
	if bin != "" {
		argv = []string{bin, "api"}
	} else {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		argv = []string{self, "child-api"}
		if profile != "" {
			argv = append(argv, "-cpuprofile", profile)
		}
	}
	env := os.Environ()
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	env = append(env, "MARKET_HTTP_ADDR="+httpAddr, "MARKET_OPS_ADDR="+opsAddr)
	s, err := startChild(ctx, name, pinned(o, serverCore(), argv...), env, "http://"+httpAddr)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, s, "http://"+opsAddr+"/readyz", http.StatusOK); err != nil {
		return nil, errors.Join(err, s.stop())
	}
	return s, nil
}

// capturedBody is one api answer the bare server replays.
type capturedBody struct {
	ContentType string `json:"content_type"`
	Body        []byte `json:"body"`
	ETag        string `json:"etag"` // the api's; the bare server does not send it
	// Header is every header of the api's answer but Date (which net/http
	// writes itself): what the bare server replays with -bare-headers.
	Header http.Header `json:"header"`
}

// startBare starts the bare handler serving bodies (by request URI); with
// replay it sends the api's whole header set, not only its Content-Type.
func startBare(ctx context.Context, o options, bodies map[string]capturedBody, replay bool) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "loadtest-bodies-*.json")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if err := json.NewEncoder(f).Encode(bodies); err != nil {
		f.Close()
		return nil, err
	}
	f.Close()
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	argv := []string{self, "child-bare", "-addr", addr, "-bodies", f.Name()}
	name := "bare"
	if replay {
		argv = append(argv, "-replay-headers")
		name = "bare-headers"
	}
	if o.cpuProfile != "" {
		argv = append(argv, "-cpuprofile", o.cpuProfile+"."+name)
	}
	s, err := startChild(ctx, name, pinned(o, serverCore(), argv...), os.Environ(), "http://"+addr)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, s, "http://"+addr+"/ready", http.StatusNoContent); err != nil {
		return nil, errors.Join(err, s.stop())
	}
	return s, nil
}

func startChild(ctx context.Context, name string, argv, env []string, base string) (*server, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	s := &server{name: name, base: base, cmd: cmd, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stdout = io.Discard
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	return s, nil
}

// waitHTTP polls url until it answers status, the child exits or 30 s pass.
func waitHTTP(ctx context.Context, s *server, url string, status int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == status {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("%s exited before it was ready: %s", s.name, s.stderr.tail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within 30 s (last: %v): %s", s.name, err, s.stderr.tail())
		}
	}
}

// stop ends the child with SIGTERM and reports a failed exit.
func (s *server) stop() error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("%s did not stop within 20 s", s.name)
	}
	if st := s.cmd.ProcessState; st != nil && !st.Success() {
		return fmt.Errorf("%s exited with %v: %s", s.name, st, s.stderr.tail())
	}
	return nil
}

// cpu is the user+system CPU time of the child so far (/proc/PID/stat;
// taskset execs the command, so the pid is the server's).
func (s *server) cpu() time.Duration { return procCPU(s.cmd.Process.Pid) }

func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ = 100
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// capture fetches one answer of the api, which the bare handler replays.
func capture(ctx context.Context, url, key, body string) (capturedBody, error) {
	req, err := newRequest(ctx, url, key, body)
	if err != nil {
		return capturedBody{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return capturedBody{}, fmt.Errorf("capture: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return capturedBody{}, fmt.Errorf("capture: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return capturedBody{}, fmt.Errorf("capture: %s %s answered %d: %s (the tool seeds binance spot screener rows, 1h candles and crypto swing analytics only)",
			req.Method, req.URL.RequestURI(), resp.StatusCode, strings.TrimSpace(string(b)))
	}
	h := resp.Header.Clone()
	h.Del("Date") // net/http writes its own
	// Content-Length stays: the api sets it on every data 200 (net/http
	// would otherwise chunk a body over 2 KB), so the replay does too.
	return capturedBody{ContentType: resp.Header.Get("Content-Type"), Body: b, ETag: resp.Header.Get("ETag"), Header: h}, nil
}

// newRequest is a GET of url, or a JSON POST of body when there is one.
func newRequest(ctx context.Context, url, key, body string) (*http.Request, error) {
	method := http.MethodGet
	if body != "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-API-Key", key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// checkNotModified makes sure the api answers url with 304 to etag (-conditional).
func checkNotModified(ctx context.Context, url, key, etag, body string) error {
	req, err := newRequest(ctx, url, key, body)
	if err != nil {
		return err
	}
	req.Header.Set("If-None-Match", etag)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("conditional: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if etag == "" || resp.StatusCode != http.StatusNotModified {
		return fmt.Errorf("conditional: %s %s with If-None-Match %q answered %d, want 304", req.Method, req.URL.RequestURI(), etag, resp.StatusCode)
	}
	return nil
}

// child runs the server side of the tool in a child process.
func child(mode string, args []string) int {
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "child-bare: listen address")
	bodiesFile := fs.String("bodies", "", "child-bare: the captured bodies (JSON)")
	cpuProfile := fs.String("cpuprofile", "", "CPU profile of the whole run")
	replay := fs.Bool("replay-headers", false, "child-bare: send the api's whole captured header set, not only its Content-Type")
	_ = fs.Parse(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	switch mode {
	case "child-api":
		m := &app.Main{Getenv: os.Getenv, Stdout: os.Stdout, Stderr: os.Stderr}
		return m.Run(ctx, []string{"api"})
	case "child-bare":
		return serveBare(ctx, *addr, *bodiesFile, *replay)
	}
	fmt.Fprintf(os.Stderr, "unknown child mode %q\n", mode)
	return 2
}

// serveBare is the baseline: net/http writing the captured bytes (with
// replay, the captured headers too: every response header of the api's
// answer, so the bytes on the wire are the api's but for Date and the
// values that change per request).
func serveBare(ctx context.Context, addr, bodiesFile string, replay bool) int {
	b, err := os.ReadFile(bodiesFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var bodies map[string]capturedBody
	if err := json.Unmarshal(b, &bodies); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := &http.Server{Addr: addr, ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == keyCheckPath {
			if domain.CheckKeyFormat(r.Header.Get("X-API-Key")) {
				w.WriteHeader(http.StatusNoContent)
			} else {
				w.WriteHeader(http.StatusBadRequest)
			}
			return
		}
		c, ok := bodies[r.URL.RequestURI()]
		if !ok {
			w.WriteHeader(http.StatusNoContent) // /ready, and anything not captured
			return
		}
		if replay {
			h := w.Header()
			for k, v := range c.Header {
				h[k] = v
			}
		} else {
			w.Header().Set("Content-Type", c.ContentType)
		}
		_, _ = w.Write(c.Body)
	})}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// lockedBuffer collects a child's stderr.
type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 1<<20 {
		b.buf = b.buf[len(b.buf)-1<<19:]
	}
	return len(p), nil
}

func (b *lockedBuffer) tail() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := strings.TrimSpace(string(b.buf))
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return s
}
