package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/marketscreener/market/admission"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// buildMarketd compiles the real binary once per test run.
var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "marketd-e2e-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "marketd")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/marketscreener/market/cmd/marketd")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v: %s", err, out)
	}
	return bin, nil
})

// TestQuotaSurvivesSIGKILL: an api process killed with SIGKILL in the
// middle of a burst loses no admitted request from the monthly count:
// every 200 the clients received is in the ledger a new process reads.
func TestQuotaSurvivesSIGKILL(t *testing.T) {
	t.Parallel()
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	d := newDeployment(t, nil)
	id := d.cli("clients", "create", "--org", "Killed", "--tier", "business", "--rate-limit", "100000")
	key := d.cli("keys", "issue", "--client", id)

	// A real process on a port of its own, so it can be SIGKILLed.
	cmd := exec.Command(bin, "api")
	for k, v := range d.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "MARKET_LOG_LEVEL=info")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "listening" {
				addr <- rec["http"].(string)
			}
		}
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a + "/api/v1/public"
	case <-time.After(20 * time.Second):
		t.Fatal("marketd api did not listen")
	}
	poll(t, 10*time.Second, func() string {
		resp, err := http.Get(base + "/usage")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			return "not ready"
		}
		return ""
	})

	// Load from 16 connections; SIGKILL once a few hundred were served and
	// the load lasted a second, long enough for the ledger to lease.
	var served atomic.Int64
	started := time.Now()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/usage", nil)
				req.Header.Set("X-API-Key", key)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return // the process is gone
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					served.Add(1)
				}
			}
		}()
	}
	poll(t, 20*time.Second, func() string {
		if served.Load() < 300 || time.Since(started) < time.Second {
			return fmt.Sprintf("only %d served", served.Load())
		}
		return ""
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	stop()
	wg.Wait()

	var show struct {
		UsedThisMonth int64 `json:"used_this_month"`
	}
	if err := json.Unmarshal([]byte(d.cli("clients", "show", id, "--json")), &show); err != nil {
		t.Fatal(err)
	}
	got := served.Load()
	if show.UsedThisMonth < got {
		t.Fatalf("after SIGKILL the ledger has %d requests, but clients were served %d", show.UsedThisMonth, got)
	}
	// Counted but not served: at most one request in flight per connection,
	// plus what the killed process's quota leases had not used (the one in
	// use and the one asked for ahead, each at most admission.MaxQuotaLease;
	// in practice 100 ms of the client's traffic: see the log line).
	if limit := got + 16 + 2*admission.MaxQuotaLease; show.UsedThisMonth > limit {
		t.Fatalf("ledger %d exceeds served %d by more than the 16 requests in flight and two leases (limit %d)", show.UsedThisMonth, got, limit)
	}
	t.Logf("served %d, ledger %d after SIGKILL", got, show.UsedThisMonth)
}
