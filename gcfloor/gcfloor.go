// Package gcfloor keeps a process's garbage-collection goal from falling
// below the largest goal its GOGC set within a recent window (a day and an
// hour by default), so that the memory a recurring peak needs stays mapped
// between two peaks.
//
// A worker's live heap (mostly its candle cache) is much the same all day,
// but what it allocates is not: a close rescores thousands of assets in a
// few seconds, and a 00:00 close of 2,000 crypto assets grows the heap
// from ≈ 0.3 GB to ≈ 1.3 GB before its collection (GOGC 300). Between two
// closes the collector still runs (at least every two minutes), each cycle
// sets a goal from the live heap of that moment, and the runtime's
// scavenger returns to the operating system what the process holds above
// 110 % of that goal. The next close touches those pages again: a page
// fault every 4 KiB. On the virtual machines measured a fault costs about
// 12 µs, and a 00:00 close took 45,000–60,000 of them, a fifth of its Go
// CPU (BENCHMARKS.md, "Alerts at a close").
//
// With the floor, after every collection the goal is the larger of what
// GOGC asks (the live heap times 1 + GOGC/100) and the largest such goal
// of the window, so the scavenger keeps what the last day's biggest close
// used: the process never holds more than GOGC alone let it reach within
// the window, but holds it between the peaks. Under a memory limit
// (GOMEMLIMIT, or the cgroup's share the roles apply) the floor stays below
// nine tenths of the limit, and the limit itself still bounds the heap.
package gcfloor

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultWindow is how long a goal is remembered: a day, so that the
// biggest close of a day (00:00 UTC, every style at once) is still
// remembered at the next, and an hour of margin.
const DefaultWindow = 25 * time.Hour

// limitShare is the part of a memory limit the floor may reach.
const limitShare = 0.9

// Start keeps the goal at or above the floor, from the next collection on,
// until stop is called. The GOGC in effect when it is called is the one
// the goal follows otherwise; GOGC off (negative) starts nothing. window
// ≤ 0 is DefaultWindow.
func Start(window time.Duration) (stop func()) {
	percent := debug.SetGCPercent(100)
	debug.SetGCPercent(percent)
	if percent < 0 {
		return func() {}
	}
	if window <= 0 {
		window = DefaultWindow
	}
	t := &tuner{floor: Floor{GOGC: percent, Window: window}}
	t.arm()
	return func() {
		if t.stopped.CompareAndSwap(false, true) {
			t.mu.Lock()
			defer t.mu.Unlock()
			debug.SetGCPercent(percent)
		}
	}
}

// tuner applies the floor after every collection: a cleanup on an object
// nothing references runs after the cycle that found it unreachable, and
// arms the next one.
type tuner struct {
	mu      sync.Mutex
	floor   Floor
	stopped atomic.Bool
}

// sentinel is what the cleanup is attached to: pointer-shaped so that the
// allocator does not batch it with other small objects (a cleanup on a
// batched tiny object may never run).
type sentinel struct{ _ [2]*byte }

func (t *tuner) arm() {
	runtime.AddCleanup(new(sentinel), (*tuner).cycle, t)
}

func (t *tuner) cycle() {
	if t.stopped.Load() {
		return
	}
	t.mu.Lock()
	if !t.stopped.Load() {
		debug.SetGCPercent(t.floor.Percent(liveHeap(), time.Now(), memoryLimit()))
	}
	t.mu.Unlock()
	t.arm()
}

var liveSample = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}

// liveHeap is the heap the last collection marked live.
func liveHeap() uint64 {
	metrics.Read(liveSample)
	if liveSample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return liveSample[0].Value.Uint64()
}

// memoryLimit is the runtime's soft memory limit (math.MaxInt64: none).
func memoryLimit() int64 { return debug.SetMemoryLimit(-1) }

// Floor is the policy, apart from the runtime: the goals GOGC set after
// each collection, the largest of the window remembered.
type Floor struct {
	GOGC   int           // the percent the goal follows otherwise
	Window time.Duration // how long a goal is remembered
	goals  []goal        // decreasing, oldest first: the window's largest and the largest after each
}

type goal struct {
	at    time.Time
	bytes uint64
}

// Percent records the goal GOGC sets on a live heap of live bytes at now,
// and returns the GOGC that makes the goal the window's largest (f.GOGC
// when that is the one GOGC sets), the floor kept below limitShare of
// limit (math.MaxInt64 or less than 1: none).
func (f *Floor) Percent(live uint64, now time.Time, limit int64) int {
	if live < 100 {
		return f.GOGC
	}
	g := live + live/100*uint64(f.GOGC)
	for len(f.goals) > 0 && f.goals[len(f.goals)-1].bytes <= g {
		f.goals = f.goals[:len(f.goals)-1]
	}
	f.goals = append(f.goals, goal{now, g})
	for now.Sub(f.goals[0].at) > f.Window {
		f.goals = f.goals[1:]
	}
	floor := f.goals[0].bytes
	if limit > 0 && limit < math.MaxInt64 {
		floor = min(floor, uint64(float64(limit)*limitShare))
	}
	if floor <= g {
		return f.GOGC
	}
	p := (floor-live)/(live/100) + 1
	return max(f.GOGC, int(min(p, math.MaxInt32)))
}
