package main

import (
	"log"
	"net/http"
	_ "net/http/pprof" // on http.DefaultServeMux, served only when MARKET_PPROF_ADDR is set
	"os"
)

// startPprof serves net/http/pprof on MARKET_PPROF_ADDR (e.g.
// 127.0.0.1:6060) when it is set: a diagnostic for operators and
// benchmarks (e2e/cmd/latencybench -pprof), off by default. It is a
// listener of its own, never the public or the ops port, and should be
// bound to loopback: profiles reveal the process's internals.
func startPprof() {
	addr := os.Getenv("MARKET_PPROF_ADDR")
	if addr == "" {
		return
	}
	go func() {
		if err := http.ListenAndServe(addr, nil); err != nil { //nolint:gosec // diagnostics on loopback, off by default
			log.Printf("pprof listener: %v", err)
		}
	}()
}
