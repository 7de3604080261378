package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// The goals checked in the summary: the api's throughput at least this
// share of the bare handler's serving the same bytes, and its p99 at most
// this (BENCHMARKS.md, "API vs bare handler on the hot GETs").
const (
	goalRatio = 0.80
	goalP99   = 10 * time.Millisecond
)

// row is one measured pair.
type row struct {
	path      string
	run       int
	bare, api wrkResult
	before    *wrkResult // -before-bin, when given
	// notModified is the api answering 304 (-conditional).
	notModified *wrkResult
	// bareHeaders is the bare server replaying the api's headers too (-bare-headers).
	bareHeaders *wrkResult
}

func (r row) ratio() float64 {
	if r.bare.rps() == 0 {
		return 0
	}
	return r.api.rps() / r.bare.rps()
}

// cpuRatio is the bare server's CPU per request over the api's: what the
// throughput ratio would be if each had its core to itself, whatever else
// ran on the machine (a cross-check of noisy runs; it leaves out the
// Postgres and Redis work the api causes).
func (r row) cpuRatio() float64 {
	if r.api.serverPerReq == 0 {
		return 0
	}
	return float64(r.bare.serverPerReq) / float64(r.api.serverPerReq)
}

func printHeader(out io.Writer, o options, e *benchEnv, bodies map[string]capturedBody) {
	fmt.Fprintf(out, "## loadtest %s UTC\n\n", time.Now().UTC().Format("2006-01-02 15:04"))
	fmt.Fprintf(out, "- machine: %d cores (%s), %s, load average %s at the start\n", runtime.NumCPU(), cpuModel(), runtime.Version(), loadAvg())
	fmt.Fprintf(out, "- api: %s (tool at commit %s), MARKET_LOG_LEVEL=%s, enterprise client with the rate limit lifted (every request admitted, leases active)\n",
		o.apiLabel, commit(), o.logLevel)
	if o.pin {
		fmt.Fprintf(out, "- pinning: servers on core %d (taskset; GOMAXPROCS follows the mask: 1), wrk on core %d; Postgres and Redis not pinned\n", serverCore(), wrkCore)
	} else {
		fmt.Fprintln(out, "- pinning: none (servers, wrk, Postgres and Redis share every core)")
	}
	fmt.Fprintf(out, "- generator: %s -t1 -c%d, %s warm-up + %s measured per target, keep-alive, one request in flight per connection\n",
		wrkVersion(o), o.conns, o.warmup, o.duration)
	fmt.Fprintf(out, "- bare: net/http handler writing the captured body with the same Content-Type (and no other header: a body over 2 KB goes out chunked)")
	if o.bareHeaders {
		fmt.Fprintf(out, "; bare-headers (-bare-headers): the same, sending every header of the api's captured answer instead (all but Date, which net/http writes; Content-Length included): the same bytes as the api")
	}
	fmt.Fprintf(out, "; bodies:")
	for _, p := range o.paths {
		fmt.Fprintf(out, " %s %d B and %d headers;", strings.TrimPrefix(p, basePath), len(bodies[p].Body), len(bodies[p].Header))
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out)
}

func printTable(out io.Writer, o options, rows []row) error {
	if o.beforeBin != "" {
		printPairs(out, rows)
	}
	if o.conditional {
		printConditional(out, rows)
	}
	if o.bareHeaders {
		printBaselines(out, o, rows)
	}
	fmt.Fprintln(out, "| path | run | bare req/s | api req/s | ratio | bare p99 | api p50 | api p99 | api p99.9 | non-2xx / socket errors | wrk cpu bare/api | server cores bare/api | server µs/req bare/api (ratio) |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	var errs []error
	for _, r := range rows {
		bad := ""
		if r.notModified != nil && !r.notModified.valid() {
			errs = append(errs, fmt.Errorf("%s run %d: api 304 run had %d errors / %d socket errors: the run is invalid",
				r.path, r.run, r.notModified.Status, r.notModified.socketErrors()))
		}
		if r.bareHeaders != nil && !r.bareHeaders.valid() {
			errs = append(errs, fmt.Errorf("%s run %d: the bare server with the api's headers had %d non-2xx / %d socket errors: the run is invalid",
				r.path, r.run, r.bareHeaders.Status, r.bareHeaders.socketErrors()))
		}
		if !r.bare.valid() || !r.api.valid() {
			bad = " **INVALID**"
			errs = append(errs, fmt.Errorf("%s run %d: bare %d non-2xx / %d socket errors, api %d / %d: the run is invalid",
				r.path, r.run, r.bare.Status, r.bare.socketErrors(), r.api.Status, r.api.socketErrors()))
		}
		fmt.Fprintf(out, "| `%s` | %d | %s | %s | **%.2f** | %s | %s | %s | %s | %d / %d%s | %.2f / %.2f | %.2f / %.2f | %.1f / %.1f (%.2f) |\n",
			strings.TrimPrefix(r.path, basePath), r.run, thousands(r.bare.rps()), thousands(r.api.rps()), r.ratio(),
			us(r.bare.P99), us(r.api.P50), us(r.api.P99), us(r.api.P999),
			r.bare.Status+r.api.Status, r.bare.socketErrors()+r.api.socketErrors(), bad,
			r.bare.wrkCPU, r.api.wrkCPU, r.bare.serverCPU, r.api.serverCPU,
			micros(r.bare.serverPerReq), micros(r.api.serverPerReq), r.cpuRatio())
	}
	fmt.Fprintln(out)
	for _, p := range o.paths {
		var ratios, cpuRatios []float64
		var p99s []int64
		for _, r := range rows {
			if r.path == p {
				ratios = append(ratios, r.ratio())
				cpuRatios = append(cpuRatios, r.cpuRatio())
				p99s = append(p99s, r.api.P99)
			}
		}
		slices.Sort(ratios)
		slices.Sort(cpuRatios)
		slices.Sort(p99s)
		mr, mc, mp := ratios[len(ratios)/2], cpuRatios[len(cpuRatios)/2], p99s[len(p99s)/2]
		fmt.Fprintf(out, "- `%s`: median ratio to the bare handler of this table **%.2f** (goal ≥ %.2f: %s), median api p99 %s (goal ≤ %s: %s); median CPU-per-request ratio %.2f\n",
			strings.TrimPrefix(p, basePath), mr, goalRatio, verdict(mr >= goalRatio), us(mp), goalP99, verdict(time.Duration(mp)*time.Microsecond <= goalP99), mc)
	}
	for _, r := range rows {
		if o.pin && r.bare.wrkCPU > 0.9 {
			fmt.Fprintf(out, "- warning: wrk used %.2f of its core on the bare run of %s run %d: the generator may be the bottleneck\n", r.bare.wrkCPU, r.path, r.run)
		}
		if o.pin && min(r.bare.serverCPU, r.api.serverCPU) < 0.9 {
			fmt.Fprintf(out, "- warning: %s run %d: a server used only %.2f / %.2f of its core: something else ran on it (or it waited), so the ratio is noise\n",
				r.path, r.run, r.bare.serverCPU, r.api.serverCPU)
		}
	}
	return errors.Join(errs...)
}

// printPairs is the before/after table of -before-bin: each run measured
// bare, before and after back to back.
func printPairs(out io.Writer, rows []row) {
	fmt.Fprintln(out, "| path | run | bare req/s | before req/s | before ratio | after req/s | after ratio | before p99 | after p99 | non-2xx before/after | server µs/req bare/before/after |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		b := *r.before
		fmt.Fprintf(out, "| `%s` | %d | %s | %s | %.2f | %s | **%.2f** | %s | %s | %d / %d | %.1f / %.1f / %.1f |\n",
			strings.TrimPrefix(r.path, basePath), r.run, thousands(r.bare.rps()), thousands(b.rps()), b.rps()/max(r.bare.rps(), 1),
			thousands(r.api.rps()), r.ratio(), us(b.P99), us(r.api.P99), b.Status+b.socketErrors(), r.api.Status+r.api.socketErrors(),
			micros(r.bare.serverPerReq), micros(b.serverPerReq), micros(r.api.serverPerReq))
	}
	fmt.Fprintln(out)
}

// printBaselines is the table of -bare-headers: the api against both
// baselines, the bare handler sending the body with its Content-Type and
// the one replaying the api's whole answer (every header).
func printBaselines(out io.Writer, o options, rows []row) {
	fmt.Fprintln(out, "| path | run | bare req/s (Content-Type only) | bare req/s (api's headers) | api req/s | ratio to bare | ratio to bare with headers | api p99 | non-2xx / socket errors bare-headers | server µs/req bare / bare-headers / api |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		h := *r.bareHeaders
		fmt.Fprintf(out, "| `%s` | %d | %s | %s | %s | %.2f | **%.2f** | %s | %d / %d | %.1f / %.1f / %.1f |\n",
			strings.TrimPrefix(r.path, basePath), r.run, thousands(r.bare.rps()), thousands(h.rps()), thousands(r.api.rps()),
			r.ratio(), r.api.rps()/max(h.rps(), 1), us(r.api.P99), h.Status, h.socketErrors(),
			micros(r.bare.serverPerReq), micros(h.serverPerReq), micros(r.api.serverPerReq))
	}
	fmt.Fprintln(out)
	for _, p := range o.paths {
		var a, b, c []float64
		for _, r := range rows {
			if r.path == p {
				a = append(a, r.ratio())
				b = append(b, r.api.rps()/max(r.bareHeaders.rps(), 1))
				if r.api.serverPerReq > 0 {
					c = append(c, float64(r.bareHeaders.serverPerReq)/float64(r.api.serverPerReq))
				}
			}
		}
		slices.Sort(a)
		slices.Sort(b)
		slices.Sort(c)
		mc := 0.0
		if len(c) > 0 {
			mc = c[len(c)/2]
		}
		ma, mb := a[len(a)/2], b[len(b)/2]
		fmt.Fprintf(out, "- `%s`: median ratio to the bare handler serving the same bytes (the api's headers) **%.2f** (runs %.2f–%.2f; goal ≥ %.2f: %s), "+
			"to the bare handler sending only Content-Type **%.2f** (runs %.2f–%.2f; %s); median CPU-per-request ratio to the former %.2f\n",
			strings.TrimPrefix(p, basePath), mb, b[0], b[len(b)-1], goalRatio, verdict(mb >= goalRatio),
			ma, a[0], a[len(a)-1], verdict(ma >= goalRatio), mc)
	}
	fmt.Fprintln(out)
}

// printConditional is the table of -conditional: the api's 200 and its 304
// to the same request with If-None-Match, measured back to back.
func printConditional(out io.Writer, rows []row) {
	fmt.Fprintln(out, "| path | run | bare req/s | api 200 req/s | api 304 req/s | 304/200 | 200 p50 / p99 | 304 p50 / p99 | bytes/answer 200 / 304 | errors 200 / 304 | server µs/req 200 / 304 |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rows {
		if r.notModified == nil {
			continue
		}
		c := *r.notModified
		fmt.Fprintf(out, "| `%s` | %d | %s | %s | %s | **%.2f** | %s / %s | %s / %s | %d / %d | %d / %d | %.1f / %.1f |\n",
			strings.TrimPrefix(r.path, basePath), r.run, thousands(r.bare.rps()), thousands(r.api.rps()), thousands(c.rps()),
			c.rps()/max(r.api.rps(), 1), us(r.api.P50), us(r.api.P99), us(c.P50), us(c.P99),
			r.api.Bytes/max(r.api.Requests, 1), c.Bytes/max(c.Requests, 1),
			r.api.Status+r.api.socketErrors(), c.Status+c.socketErrors(), micros(r.api.serverPerReq), micros(c.serverPerReq))
	}
	fmt.Fprintln(out)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// us formats microseconds as milliseconds.
func us(v int64) string { return fmt.Sprintf("%.2f ms", float64(v)/1000) }

// thousands formats n with a thin space every three digits (as BENCHMARKS.md does).
func thousands(f float64) string {
	s := fmt.Sprintf("%.0f", f)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// loadAvg is the 1-, 5- and 15-minute load average, or "unknown".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// commit is the git HEAD of the working directory (with "+dirty" when it
// has changes), or "unknown".
func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += "+dirty"
	}
	return c
}
