// Package app is the marketd program: sub-command dispatch, configuration,
// and the wiring of the api, worker and scheduler roles. It lives apart from
// package main so tests can start the real program in-process on port 0.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"

	"github.com/marketscreener/market/feeds"
)

// Main is one run of the program.
type Main struct {
	Getenv func(string) string
	Stdout io.Writer
	Stderr io.Writer
	// Logger overrides the JSON logger on Stderr (tests).
	Logger *slog.Logger

	mu        sync.Mutex
	httpAddr  string
	opsAddr   string
	listening chan struct{}
}

// usageError is a command-line mistake: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

type command struct {
	summary string
	run     func(m *Main, ctx context.Context, args []string) error
}

func commands() map[string]command {
	return map[string]command{
		"migrate":     {"apply the embedded database migrations (safe to run twice)", (*Main).cmdMigrate},
		"api":         {"serve the public API and the ops listener", serveRole("api")},
		"worker":      {"run the asynq worker (ingest, scoring, statistics, webhooks)", serveRole("worker")},
		"scheduler":   {"run the asynq scheduler (enqueues periodic tasks)", serveRole("scheduler")},
		"all":         {"run api, worker and scheduler in one process", serveRole("all")},
		"clients":     {"manage clients: create, list, show, suspend, activate, set-tier, set-limits", (*Main).cmdClients},
		"keys":        {"manage API keys: issue, revoke, list", (*Main).cmdKeys},
		"webhooks":    {"webhook subscriptions: list [--client ID], enable ID (after automatic disabling)", (*Main).cmdWebhooks},
		"demo-key":    {"create an enterprise demo client and print a key for it", (*Main).cmdDemoKey},
		"probe":       {"GET a URL, exit 0 on 2xx (container health checks)", (*Main).cmdProbe},
		"backfill":    {"load candle history: --market M --exchange E [--symbols ...] --timeframe TF --days N", (*Main).cmdBackfill},
		"feed-health": {"show the last success and error of every ingested feed", (*Main).cmdFeedHealth},
		"catalogue":   {"list the (market, exchange, instrument) combinations of a region", (*Main).cmdCatalogue},
	}
}

// Run runs the sub-command in args and returns the process exit status.
func (m *Main) Run(ctx context.Context, args []string) int {
	if m.Getenv == nil {
		m.Getenv = func(string) string { return "" }
	}
	if m.Stdout == nil {
		m.Stdout = io.Discard
	}
	if m.Stderr == nil {
		m.Stderr = io.Discard
	}
	m.mu.Lock()
	if m.listening == nil {
		m.listening = make(chan struct{})
	}
	m.mu.Unlock()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		m.printHelp()
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(m.Stderr, "marketd: unknown command %q (run marketd help)\n", args[0])
		return 2
	}
	err := cmd.run(m, ctx, args[1:])
	if err == nil || errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return 0
	}
	fmt.Fprintf(m.Stderr, "marketd %s: %s\n", args[0], oneLine(err.Error()))
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ") }

func (m *Main) printHelp() {
	fmt.Fprintln(m.Stdout, "usage: marketd <command> [flags]\n\ncommands:")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(m.Stdout, "  %-10s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(m.Stdout, "\nEvery command accepts --json. Configuration comes from the environment:")
	for _, o := range configOptions() {
		fmt.Fprintf(m.Stdout, "  %-20s %s\n", o.name, plain(o.doc))
	}
	fmt.Fprintln(m.Stdout, "\nHosts of MARKET_FEED_URLS:")
	for _, h := range feeds.HostDocs() {
		fmt.Fprintf(m.Stdout, "  %-22s %s (default %s)\n", h.Name, plain(h.Doc), h.Default)
	}
}

// plain is Markdown text for a terminal: without the code spans' backquotes.
func plain(markdown string) string { return strings.ReplaceAll(markdown, "`", "") }

func (m *Main) logger(cfg Config) *slog.Logger {
	if m.Logger != nil {
		return m.Logger
	}
	return slog.New(slog.NewJSONHandler(m.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
}

// Listening is closed once the servers of a serving role are bound.
func (m *Main) Listening() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.listening == nil {
		m.listening = make(chan struct{})
	}
	return m.listening
}

// HTTPAddr is the bound address of the public listener (after Listening).
func (m *Main) HTTPAddr() string { m.mu.Lock(); defer m.mu.Unlock(); return m.httpAddr }

// OpsAddr is the bound address of the ops listener (after Listening).
func (m *Main) OpsAddr() string { m.mu.Lock(); defer m.mu.Unlock(); return m.opsAddr }

func (m *Main) setAddrs(httpLn, opsLn net.Listener) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if httpLn != nil {
		m.httpAddr = httpLn.Addr().String()
	}
	if opsLn != nil {
		m.opsAddr = opsLn.Addr().String()
	}
	close(m.listening)
}
