package app

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// apiGOGC is the api role's garbage-collection target when GOGC is not
// set. The api's live heap (read caches, the OpenAPI schemas, the metric
// series) is scanned on every cycle, and at Go's default of 100 a cycle
// comes every few thousand requests: under load the collector cost
// ≈ 2 µs a request against ≈ 1 µs for a bare net/http handler
// (BENCHMARKS.md, "API vs bare handler on the hot GETs"). At 400 the heap may grow to five times the
// live heap before a cycle (≈ 60 MB resident under the benchmark's load
// instead of ≈ 45 MB) and a cycle comes four times less often.
const apiGOGC = 400

// workerGOGC is the worker role's (and `marketd all`'s) unless GOMEMLIMIT
// is set (tuneRoleGC): its live heap is mostly the candles the scorer keeps
// (store.CandleCache), scanned on every cycle while a close allocates the
// reports, their JSON and the alerts' payloads. At Go's default of 100
// the collector took about a quarter of a 00:00 close's Go CPU (2,000
// assets in four styles with 10,000 alerts, BenchmarkCloseAlerts); at
// 300 the close uses ≈ 0.35 s less CPU, for a peak resident set of
// ≈ 2 GB instead of ≈ 1 GB in that benchmark (BENCHMARKS.md, "Alerts at a
// close").
const workerGOGC = 300

// memoryShare is the part of the cgroup's memory limit (when there is
// one) given to the api and the worker as their soft limit (GOMEMLIMIT) when GOMEMLIMIT is
// not set: near it the collector runs as often as needed, whatever GOGC.
const memoryShare = 0.8

// cgroupMemoryMax is where the container's memory limit is read (cgroup v2).
var cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// tuneRoleGC applies a role's GOGC and the soft memory limit from the
// cgroup's; GOGC and GOMEMLIMIT in the environment (which the runtime has
// applied already) take precedence.
//
// With offUnderLimit (the worker's roles), GOMEMLIMIT set to a limit and
// GOGC not set, GOGC is off instead of gogc: the process collects only as
// its heap nears the limit, and keeps the memory a close used for the
// next one. Under any GOGC a worker idle between closes gets the
// runtime's periodic cycle (every 2 minutes without another), which finds
// little in use; the scavenger then returns to the system all but 10 %
// above that, and the next close touches the same memory again, page by
// page, with the close's own cycle on top. GOGC off has neither: no
// periodic cycle, and every cycle comes near the limit, so the scavenger
// keeps up to 95 % of it (BENCHMARKS.md, "The worker's collector between
// closes": in one process, close by close, a 00:00 close after four idle
// minutes took 22 % less Go CPU and its alerts' p95 was 13 % lower).
// Only a GOMEMLIMIT the operator set says how much memory the process may
// keep: the cgroup's limit may be shared by other processes (tests, or
// several roles in one container), each of which would grow to 80 % of it.
func tuneRoleGC(gogc int, offUnderLimit bool, getenv func(string) string, logger *slog.Logger) {
	if getenv("GOMEMLIMIT") == "" {
		if limit, ok := cgroupMemoryLimit(); ok {
			soft := int64(float64(limit) * memoryShare)
			debug.SetMemoryLimit(soft)
			logger.Debug("gc: soft memory limit from the cgroup's; set GOMEMLIMIT to override", "bytes", soft)
		}
	}
	if getenv("GOGC") != "" {
		return
	}
	if limit := debug.SetMemoryLimit(-1); offUnderLimit && getenv("GOMEMLIMIT") != "" && limit != math.MaxInt64 {
		debug.SetGCPercent(-1)
		logger.Info("gc: GOGC off, the collector runs near GOMEMLIMIT; set GOGC to override", "limit_bytes", limit)
		return
	}
	debug.SetGCPercent(gogc)
	logger.Debug("gc: GOGC defaults to the role's value; set GOGC to override", "gogc", gogc)
}

// cgroupMemoryLimit is the cgroup's memory limit in bytes, if there is one.
func cgroupMemoryLimit() (int64, bool) {
	b, err := os.ReadFile(cgroupMemoryMax)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64) // "max" when unlimited
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}
