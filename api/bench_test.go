package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/api"
)

// fixedGate admits every request with one outcome (the gate's own cost is
// benchmarked in package admission).
type fixedGate struct{ out admission.Outcome }

func (g fixedGate) Admit(context.Context, admission.Request) (admission.Outcome, error) {
	return g.out, nil
}

// discardWriter is the cheapest ResponseWriter: the benchmarks measure the
// handlers, not a recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

// benchHandler measures one GET of path through h, after one to warm the caches.
func benchHandler(b *testing.B, h http.Handler, path, key string) {
	req, _ := http.NewRequest(http.MethodGet, "http://api"+path, nil)
	req.Header.Set("X-API-Key", key)
	req.RemoteAddr = "127.0.0.1:40000"
	w := &discardWriter{h: http.Header{}}
	h.ServeHTTP(w, req)
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, req)
	}
}

// BenchmarkHandler compares the api's handlers (with a gate that admits
// at once: the gate is benchmarked in package admission) with a bare
// handler writing bytes: what the api adds per request, in CPU and
// allocations, without the network.
func BenchmarkHandler(b *testing.B) {
	f := newMarketFixture(b)
	seedMarketData(b, f)
	out, err := storeGate{f.db}.Admit(context.Background(), admission.Request{Key: f.key})
	if err != nil || !out.Admitted() {
		b.Fatalf("admit: %+v, %v", out, err)
	}
	srv := api.New(api.Config{Region: "global", Now: func() time.Time { return f.now }, Cache: f.cache}, f.db, fixedGate{out})
	humaOnly := api.New(api.Config{Region: "global", Now: func() time.Time { return f.now }, Cache: f.cache}, f.db, fixedGate{out})
	api.DisableHotDecoders(humaOnly)
	body := []byte(`{"org_name":"Fixture","tier":"business"}`)
	b.Run("bare", func(b *testing.B) {
		benchHandler(b, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(body)
		}), "/", "")
	})
	for _, c := range []struct{ name, path string }{{"usage", "/usage"}, {"screener", "/screener/crypto/binance/spot"},
		{"ohlcv", "/ohlcv/crypto/binance/ETH_USDT/1h"}, {"report", "/analytics/crypto/BTC_USDT?lang=en"}} {
		b.Run(c.name, func(b *testing.B) { benchHandler(b, srv.Handler(), "/api/v1/public"+c.path, f.key) })
		b.Run(c.name+"-huma", func(b *testing.B) { benchHandler(b, humaOnly.Handler(), "/api/v1/public"+c.path, f.key) })
	}
}
