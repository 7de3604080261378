package api

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Check is one dependency probed for readiness. A failing required check
// makes the process not ready (public requests get 503); a failing optional
// one makes it degraded (served, with fallbacks).
type Check struct {
	Name     string
	Required bool
	Probe    func(ctx context.Context) error
}

// Readiness probes the checks periodically and remembers the last results.
type Readiness struct {
	checks []Check
	ready  atomic.Bool
	mu     sync.Mutex
	state  map[string]string
	// Warmup, when set, lists what is still warming up (for example the
	// markets and styles not scored yet since the start); /readyz shows it.
	// It does not affect readiness, and is no longer asked once it returned
	// an empty list (warm-up happens once).
	Warmup  func(ctx context.Context) ([]string, error)
	warming []string
	warm    bool
	// Served maps each combination a configured feed serves
	// ("crypto/binance/spot") to that feed; Unserved lists the region's
	// others, which are not scheduled. /readyz shows both; nil hides them.
	Served   map[string]string
	Unserved []string
	// Info, when set, adds fields to /readyz's body: what the last probe
	// saw that an operator should know even when it is fine (for example a
	// schema ahead of the binary during a rolling upgrade).
	Info func() map[string]any
}

// NewReadiness returns a Readiness that is not ready until the first probe passes.
func NewReadiness(checks ...Check) *Readiness {
	return &Readiness{checks: checks, state: map[string]string{}}
}

// Ready reports whether every required check passed at the last probe.
func (r *Readiness) Ready() bool { return r.ready.Load() }

// ProbeOnce runs every check once and updates the state.
func (r *Readiness) ProbeOnce(ctx context.Context) {
	ready := true
	state := make(map[string]string, len(r.checks))
	for _, c := range r.checks {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.Probe(pctx)
		cancel()
		switch {
		case err == nil:
			state[c.Name] = "ok"
		case c.Required:
			ready = false
			state[c.Name] = "failing: " + err.Error()
		default:
			state[c.Name] = "degraded: " + err.Error()
		}
	}
	r.mu.Lock()
	r.state = state
	warm := r.warm
	r.mu.Unlock()
	r.ready.Store(ready)
	if r.Warmup != nil && !warm && ready {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		warming, err := r.Warmup(pctx)
		cancel()
		if err == nil {
			r.mu.Lock()
			r.warming, r.warm = warming, len(warming) == 0
			r.mu.Unlock()
		}
	}
}

// WarmingUp lists what was still warming up at the last probe (nil once
// everything is warm, or when nothing is watched).
func (r *Readiness) WarmingUp() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.warm {
		return nil
	}
	return append([]string(nil), r.warming...)
}

// Run probes every interval until ctx ends (fast while not ready).
func (r *Readiness) Run(ctx context.Context, interval time.Duration) {
	for {
		r.ProbeOnce(ctx)
		wait := interval
		if !r.Ready() {
			wait = min(interval, 250*time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// Status is "ready", "degraded" or "not_ready", with each check's state.
func (r *Readiness) Status() (string, map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	status := "ready"
	for _, c := range r.checks {
		st, ok := r.state[c.Name]
		switch {
		case !ok || (c.Required && st != "ok"):
			status = "not_ready"
		case st != "ok" && status == "ready":
			status = "degraded"
		}
	}
	out := make(map[string]string, len(r.state))
	for k, v := range r.state {
		out[k] = v
	}
	return status, out
}

// OpsHandler serves the operator listener: /healthz (alive), /readyz (ready,
// degraded or not, and why), /metrics (Prometheus) and any extra handlers
// (e.g. the asynqmon UI).
func OpsHandler(r *Readiness, metrics http.Handler, extra map[string]http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"alive"}` + "\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		status, checks := r.Status()
		w.Header().Set("Content-Type", "application/json")
		if status == "not_ready" {
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		body := map[string]any{"status": status, "checks": checks}
		if warming := r.WarmingUp(); len(warming) > 0 {
			body["warming_up"] = warming
		}
		if r.Served != nil {
			body["served"] = r.Served
		}
		if len(r.Unserved) > 0 {
			body["unserved"] = r.Unserved
		}
		if r.Info != nil {
			for k, v := range r.Info() {
				if _, taken := body[k]; !taken {
					body[k] = v
				}
			}
		}
		_ = json.NewEncoder(w).Encode(body)
	})
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	for pattern, h := range extra {
		mux.Handle(pattern, h)
	}
	return mux
}
