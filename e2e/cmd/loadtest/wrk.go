package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// reportLua ends every wrk script: it prints the run's numbers as one JSON
// line (latencies in microseconds), which runWrk parses.
const reportLua = `
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('\nWRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,"p50":%d,"p90":%d,"p99":%d,"p999":%d,"max":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}\n',
    summary.requests, summary.duration, summary.bytes,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9), latency.max,
    e.connect, e.read, e.write, e.status, e.timeout))
end
`

// wrkRun is one wrk invocation: -t1 (one generator thread).
type wrkRun struct {
	url      string
	key      string   // X-API-Key, unless the script sets its own
	headers  []string // more request headers, "Name: value"
	conns    int
	duration time.Duration
	script   string // Lua placed before reportLua (e.g. a request() of its own)
	nice     int    // niceness of the wrk process (the flood's attacker runs at 19)
}

// wrkResult is what wrk reported, plus the CPU the generator and the target used.
type wrkResult struct {
	Requests   int64 `json:"requests"`
	DurationUS int64 `json:"duration_us"`
	Bytes      int64 `json:"bytes"`
	P50        int64 `json:"p50"`
	P90        int64 `json:"p90"`
	P99        int64 `json:"p99"`
	P999       int64 `json:"p999"`
	Max        int64 `json:"max"`
	Connect    int64 `json:"connect"`
	Read       int64 `json:"read"`
	Write      int64 `json:"write"`
	Status     int64 `json:"status"` // answers with a status ≥ 400
	Timeout    int64 `json:"timeout"`

	wrkCPU       float64       // cores the generator used
	serverCPU    float64       // cores the target used (filled by the caller)
	serverPerReq time.Duration // the target's CPU time per request (filled by the caller)
}

func (r wrkResult) elapsed() time.Duration { return time.Duration(r.DurationUS) * time.Microsecond }

func (r wrkResult) rps() float64 {
	if r.DurationUS <= 0 {
		return 0
	}
	return float64(r.Requests) / r.elapsed().Seconds()
}

// socketErrors counts connect, read, write and time-out errors.
func (r wrkResult) socketErrors() int64 { return r.Connect + r.Read + r.Write + r.Timeout }

// valid: every answer was 2xx/3xx and no socket failed.
func (r wrkResult) valid() bool { return r.Status == 0 && r.socketErrors() == 0 && r.Requests > 0 }

func runWrk(ctx context.Context, o options, w wrkRun) (wrkResult, error) {
	f, err := os.CreateTemp("", "loadtest-*.lua")
	if err != nil {
		return wrkResult{}, err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(w.script + reportLua); err != nil {
		f.Close()
		return wrkResult{}, err
	}
	f.Close()
	argv := []string{o.wrk, "-t1", "-c" + strconv.Itoa(w.conns), "-d" + strconv.Itoa(int(w.duration.Seconds()+0.5)) + "s",
		"--timeout", "10s", "-s", f.Name()}
	if w.key != "" {
		argv = append(argv, "-H", "X-API-Key: "+w.key)
	}
	for _, h := range w.headers {
		argv = append(argv, "-H", h)
	}
	argv = append(argv, w.url)
	argv = pinned(o, wrkCore, argv...)
	if w.nice != 0 {
		argv = append([]string{"nice", "-n", strconv.Itoa(w.nice)}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return wrkResult{}, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
	}
	wall := time.Since(start)
	_, line, ok := strings.Cut(stdout.String(), "WRKJSON ")
	if !ok {
		return wrkResult{}, fmt.Errorf("wrk printed no report: %s %s", stdout.String(), stderr.String())
	}
	line, _, _ = strings.Cut(line, "\n")
	var r wrkResult
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return wrkResult{}, fmt.Errorf("wrk report %q: %w", line, err)
	}
	if st := cmd.ProcessState; st != nil {
		r.wrkCPU = (st.UserTime() + st.SystemTime()).Seconds() / wall.Seconds()
	}
	return r, nil
}

// wrkVersion is the first line of wrk -v.
func wrkVersion(o options) string {
	out, _ := exec.Command(o.wrk, "-v").CombinedOutput()
	line, _, _ := strings.Cut(string(out), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return "wrk (version unknown)"
	}
	if i := strings.Index(line, " Copyright"); i > 0 {
		line = line[:i]
	}
	return line
}
