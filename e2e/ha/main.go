// Command ha is the high-availability harness (make bench-ha): a
// deployment of real components on one machine, whose parts it SIGKILLs
// one at a time while a load generator in a process of its own sends
// requests through HAProxy, holds event streams and receives webhooks:
//
//   - Postgres: a primary and its streaming replica (clusters of the
//     harness's own, initdb and pg_basebackup), a multi-host
//     MARKET_DATABASE_URL with target_session_attrs=read-write, the replica
//     as MARKET_DATABASE_READ_URL;
//   - Redis: a primary, a replica and three sentinels (Debian's
//     redis-server and redis-sentinel);
//   - HAProxy in front of two `marketd api`, health-checking /readyz;
//   - two `marketd worker` and two `marketd scheduler` on the synthetic feed.
//
// Every fault is a phase: the load generator counts the non-2xx answers
// and the window from the first to the last. After the run every stored
// closed candle of the checked series must equal the synthetic feed's,
// every verdict event written must have reached each held stream (resumed
// with Last-Event-ID) once and the webhook receiver once.
//
// Ports are taken from 27000-27999 and data under a temporary directory.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

func main() {
	if os.Getenv(roleEnv) == "loadgen" {
		if err := runLoadgen(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
			os.Exit(1)
		}
		return
	}
	var o Options
	flag.BoolVar(&o.Short, "short", false, "one api kill and one Redis failover only")
	flag.StringVar(&o.Dir, "dir", "", "work directory (default: a new temporary one, removed unless -keep)")
	flag.BoolVar(&o.Keep, "keep", false, "keep the work directory (logs of every process)")
	flag.StringVar(&o.Marketd, "marketd", "", "a built marketd binary (default: built from this module)")
	jsonOut := flag.String("json", "", "write the results as JSON to this file")
	flag.Parse()
	o.Log = os.Stderr
	res, err := Run(context.Background(), o)
	if res != nil {
		fmt.Println(res.Table())
		if *jsonOut != "" {
			b, _ := json.MarshalIndent(res, "", "  ")
			_ = os.WriteFile(*jsonOut, b, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ha:", err)
		os.Exit(1)
	}
	if len(res.Problems) > 0 {
		fmt.Fprintln(os.Stderr, "ha: problems:\n  "+strings.Join(res.Problems, "\n  "))
		os.Exit(1)
	}
}

// roleEnv set to "loadgen" makes the binary (or a test binary) the load
// generator.
const roleEnv = "MARKETD_HA_ROLE"

// Options of a run.
type Options struct {
	Short bool
	Dir   string
	Keep  bool
	Log   io.Writer
	// Self is the executable run as the load generator (os.Executable()).
	Self string
	// Marketd is a built marketd binary (built into Dir when empty).
	Marketd string
}

// Fault is one phase's figures.
type Fault struct {
	Name        string         `json:"name"`
	Requests    int64          `json:"requests"`
	Non2xx      int64          `json:"non_2xx"`
	ErrorWindow time.Duration  `json:"error_window_ns"`
	Recovery    time.Duration  `json:"recovery_ns,omitempty"` // the fault's own measure (promotion, restart)
	Codes       map[string]int `json:"codes,omitempty"`
	ByPath      map[string]int `json:"by_path,omitempty"` // non-2xx per path
	Examples    []string       `json:"examples,omitempty"`
	Note        string         `json:"note,omitempty"`
}

// Results of a run.
type Results struct {
	Faults         []Fault  `json:"faults"`
	EventsWritten  int      `json:"events_written"`
	StreamMissing  []int    `json:"stream_missing"`
	StreamDups     []int    `json:"stream_dups"`
	StreamResyncs  []int    `json:"stream_resyncs"`
	StreamResumes  []int    `json:"stream_resumes"`
	WebhookMissing int      `json:"webhook_missing"`
	WebhookTwice   int      `json:"webhook_twice"`
	CandlesChecked int      `json:"candles_checked"`
	CandlesBad     []string `json:"candles_bad,omitempty"`
	Problems       []string `json:"problems,omitempty"`
}

// Table is the results as a Markdown table and the loss checks.
func (r *Results) Table() string {
	var b strings.Builder
	b.WriteString("| phase | requests | non-2xx | error window | recovery | codes | non-2xx by path |\n|---|---:|---:|---:|---:|---|---|\n")
	for _, f := range r.Faults {
		rec := ""
		if f.Recovery > 0 {
			rec = fmt.Sprintf("%.1f s", f.Recovery.Seconds())
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.1f s | %s | %v | %v |\n", f.Name, f.Requests, f.Non2xx, f.ErrorWindow.Seconds(), rec, f.Codes, f.ByPath)
	}
	fmt.Fprintf(&b, "\nverdict events written: %d; per stream: missing %v, twice %v, resyncs %v, reconnects (resumed with Last-Event-ID) %v; webhooks missing %d, delivered twice %d\n",
		r.EventsWritten, r.StreamMissing, r.StreamDups, r.StreamResyncs, r.StreamResumes, r.WebhookMissing, r.WebhookTwice)
	fmt.Fprintf(&b, "closed candles compared with the synthetic feed: %d, wrong or missing %d\n", r.CandlesChecked, len(r.CandlesBad))
	return b.String()
}

var errSkip = errors.New("ha: the Debian components are missing")
