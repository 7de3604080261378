package admission_test

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/rediskeys"
)

// Example wires a gate as `marketd api` does and asks it about one request,
// as the api's middleware does; everything else is the operation's.
func Example() {
	ctx := context.Background()
	opts, _ := rediskeys.ClientOptions("redis://127.0.0.1:6379/0")
	rdb := opts.NewClient()
	var db interface { // store.DB
		admission.KeyStore
		admission.UsageStore
	}
	gate := admission.New(admission.Config{Redis: rdb, Keys: db, Usage: db, Logger: slog.Default()})
	go func() { _ = gate.Run(ctx) }() // the bus and the key directory
	defer gate.Close()                // flushes the ledger, gives back leases

	handle := func(w http.ResponseWriter, r *http.Request) {
		out, err := gate.Admit(r.Context(), admission.Request{Key: r.Header.Get("X-API-Key"), RemoteAddr: r.RemoteAddr})
		if err != nil {
			http.Error(w, "503 or 500, by the error's domain code", http.StatusServiceUnavailable)
			return
		}
		for name, v := range map[string]string{"RateLimit-Policy": out.RateLimitPolicy, "RateLimit": out.RateLimit, "Retry-After": out.RetryAfter} {
			if v != "" {
				w.Header().Set(name, v)
			}
		}
		if !out.Admitted() {
			http.Error(w, out.Detail, out.Status) // 401, 403 or 429: a problem body in the api
			return
		}
		// 400 parameters → 403 market not in tier → 404 → 200, for
		// out.Client; out.Used is this month's count including this request.
	}
	_ = handle
}
