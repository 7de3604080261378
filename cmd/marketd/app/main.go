// Package app is the marketd program: sub-command dispatch, configuration,
// and the wiring of the api, worker and scheduler roles. It lives apart from
// package main so tests can start the real program in-process on port 0.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
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

// A command is one sub-command of marketd: its arguments and summary (its
// -h help) and the function running it with a flag set of its own; a group
// ("clients") has sub-commands instead.
type command struct {
	name    string
	args    string
	summary string
	run     func(m *Main, ctx context.Context, fs *flag.FlagSet, args []string) error
	subs    []command
}

func commands() []command {
	return []command{
		{name: "migrate", args: "[--wait DURATION] [--lock-timeout 3s] [--lock-retries 10]", summary: "apply the embedded database migrations (safe to run twice)", run: (*Main).cmdMigrate},
		{name: "api", summary: "serve the public API and the ops listener", run: serveRole("api")},
		{name: "worker", summary: "run the asynq worker (ingest, scoring, statistics, webhooks)", run: serveRole("worker")},
		{name: "scheduler", summary: "run the asynq scheduler (enqueues periodic tasks)", run: serveRole("scheduler")},
		{name: "all", summary: "run api, worker and scheduler in one process", run: serveRole("all")},
		{name: "clients", summary: "manage clients", subs: clientsCommands()},
		{name: "keys", summary: "manage API keys", subs: keysCommands()},
		{name: "webhooks", summary: "webhook subscriptions", subs: webhooksCommands()},
		{name: "demo-key", args: "[--org NAME] [--new-key]", summary: "create an enterprise demo client and print a key for it", run: (*Main).cmdDemoKey},
		{name: "probe", args: "URL", summary: "GET a URL, exit 0 on 2xx (container health checks)", run: (*Main).cmdProbe},
		{name: "backfill", args: "--market M --exchange E [--symbols S,...] --timeframe TF [--days N]", summary: "load candle history", run: (*Main).cmdBackfill},
		{name: "import", args: "--source binance-archive|alpaca --market crypto|stocks [--instrument spot] [--timeframes 1d,4h,1h] [--from YYYY-MM] [--to YYYY-MM] [--symbols S,...] [--concurrency 2]",
			summary: "load years of candle history from a bulk archive or a provider's bulk bars (resumable)", run: (*Main).cmdImport},
		{name: "feed-health", summary: "show the last success and error of every ingested feed", run: (*Main).cmdFeedHealth},
		{name: "catalogue", args: "[--region R]", summary: "list the (market, exchange, instrument) combinations of a region", run: (*Main).cmdCatalogue},
	}
}

// find is the command of cmds named name.
func find(cmds []command, name string) (command, bool) {
	for _, c := range cmds {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
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
	if len(args) == 0 || isHelp(args[0]) {
		m.printHelp()
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := find(commands(), args[0])
	if !ok {
		fmt.Fprintf(m.Stderr, "marketd: unknown command %q (run marketd help)\n", args[0])
		return 2
	}
	err := m.runCommand(ctx, cmd.name, cmd, args[1:])
	var help helpText
	if errors.As(err, &help) {
		fmt.Fprint(m.Stdout, string(help))
		return 0
	}
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

// runCommand runs cmd, named path ("clients show"), with its own flag set,
// or the sub-command of a group that args names.
func (m *Main) runCommand(ctx context.Context, path string, cmd command, args []string) error {
	if cmd.subs == nil {
		return cmd.run(m, ctx, newFlagSet(path, cmd), args)
	}
	names := make([]string, len(cmd.subs))
	forms := make([]string, len(cmd.subs))
	for i, sub := range cmd.subs {
		names[i] = sub.name
		forms[i] = strings.TrimSpace(sub.name + " " + sub.args)
	}
	if len(args) == 0 {
		return usagef("usage: marketd %s %s", path, strings.Join(forms, " | "))
	}
	if isHelp(args[0]) {
		var b strings.Builder
		fmt.Fprintf(&b, "usage: marketd %s <command> [flags]\n\n%s\n\ncommands (marketd %s <command> -h for each):\n", path, cmd.summary, path)
		for _, sub := range cmd.subs {
			fmt.Fprintf(&b, "  %-11s %s\n", sub.name, sub.summary)
		}
		return helpText(b.String())
	}
	sub, ok := find(cmd.subs, args[0])
	if !ok {
		return usagef("unknown %s command %q (%s)", path, args[0], strings.Join(names, ", "))
	}
	return m.runCommand(ctx, path+" "+sub.name, sub, args[1:])
}

func isHelp(arg string) bool { return arg == "help" || arg == "-h" || arg == "--help" }

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ") }

func (m *Main) printHelp() {
	fmt.Fprintln(m.Stdout, "usage: marketd <command> [flags]\n\ncommands:")
	cmds := commands()
	slices.SortFunc(cmds, func(a, b command) int { return strings.Compare(a.name, b.name) })
	for _, c := range cmds {
		summary := c.summary
		if c.subs != nil {
			names := make([]string, len(c.subs))
			for i, sub := range c.subs {
				names[i] = sub.name
			}
			summary += ": " + strings.Join(names, ", ")
		}
		fmt.Fprintf(m.Stdout, "  %-11s %s\n", c.name, summary)
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
