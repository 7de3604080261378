package main

import (
	"log"
	"net/http"
	"net/http/pprof"
	"os"
	"time"
)

// startPprof serves net/http/pprof on MARKET_PPROF_ADDR (e.g.
// 127.0.0.1:6060) when it is set: a diagnostic for operators and
// benchmarks (e2e/cmd/latencybench -pprof), off by default. It is a
// listener of its own with a mux of its own (never http.DefaultServeMux,
// never the public or the ops port), and should be bound to loopback:
// profiles reveal the process's internals.
func startPprof() {
	addr := os.Getenv("MARKET_PPROF_ADDR")
	if addr == "" {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil {
			log.Printf("pprof listener: %v", err)
		}
	}()
}
