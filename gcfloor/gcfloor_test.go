package gcfloor_test

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/marketscreener/market/gcfloor"
)

const mb = 1 << 20

// goalOf is the goal a GOGC of p sets on a live heap of live bytes.
func goalOf(live uint64, p int) uint64 { return live + live/100*uint64(p) }

func TestFloorKeepsTheWindowsLargestGoal(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	f := gcfloor.Floor{GOGC: 300, Window: 25 * time.Hour}
	none := int64(math.MaxInt64)

	// The close's collection: GOGC's own goal, 1.2 GB.
	if p := f.Percent(300*mb, t0, none); p != 300 {
		t.Fatalf("first goal: GOGC %d, want 300", p)
	}
	// Idle, a third of the live heap: the goal stays at 1.2 GB (not 400 MB).
	p := f.Percent(100*mb, t0.Add(time.Hour), none)
	if g := goalOf(100*mb, p); g < 1200*mb || g > 1212*mb {
		t.Fatalf("idle: GOGC %d sets a goal of %d MB, want 1,200 MB (the window's largest)", p, g/mb)
	}
	// A smaller close later, then a day on: the first close has left the
	// window, the second has not.
	if p := f.Percent(200*mb, t0.Add(10*time.Hour), none); goalOf(200*mb, p) < 1200*mb {
		t.Fatalf("second close: GOGC %d, goal %d MB under the floor", p, goalOf(200*mb, p)/mb)
	}
	p = f.Percent(100*mb, t0.Add(26*time.Hour), none)
	if g := goalOf(100*mb, p); g < 800*mb || g > 808*mb {
		t.Fatalf("a day on: GOGC %d sets %d MB, want 800 MB (the second close's goal)", p, g/mb)
	}
	// A larger goal than any before is GOGC's own.
	if p := f.Percent(500*mb, t0.Add(27*time.Hour), none); p != 300 {
		t.Fatalf("largest goal: GOGC %d, want 300", p)
	}
	// Past the window of everything: GOGC alone.
	if p := f.Percent(100*mb, t0.Add(60*time.Hour), none); p != 300 {
		t.Fatalf("window passed: GOGC %d, want 300", p)
	}
}

func TestFloorStaysUnderTheMemoryLimit(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	f := gcfloor.Floor{GOGC: 300, Window: time.Hour}
	f.Percent(300*mb, t0, 1000*mb)
	p := f.Percent(100*mb, t0.Add(time.Minute), 1000*mb)
	if g := goalOf(100*mb, p); g < 900*mb || g > 910*mb {
		t.Fatalf("GOGC %d sets %d MB under a 1,000 MB limit, want 900 MB (nine tenths)", p, g/mb)
	}
	// A limit below GOGC's own goal: GOGC (the runtime enforces the limit).
	if p := f.Percent(100*mb, t0.Add(2*time.Minute), 200*mb); p != 300 {
		t.Fatalf("GOGC %d under a limit below its goal, want 300", p)
	}
	if p := f.Percent(50, t0.Add(3*time.Minute), 0); p != 300 {
		t.Fatalf("GOGC %d on an empty heap, want 300", p)
	}
}

// gogc is the GOGC in effect (the floor sets it again after every cycle).
func gogc() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestStartRaisesGOGCAfterAPeak runs the floor in this process: after a
// collection with a large live heap and one with a small one, GOGC is
// above the base, and stop restores it.
func TestStartRaisesGOGCAfterAPeak(t *testing.T) {
	old := debug.SetGCPercent(300)
	t.Cleanup(func() { debug.SetGCPercent(old) })
	stop := gcfloor.Start(0)
	defer stop()
	big := make([]byte, 128*mb)
	for i := 0; i < len(big); i += 4096 {
		big[i] = 1
	}
	runtime.GC()
	runtime.KeepAlive(big)
	big = nil
	raised := 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		runtime.GC() // the cleanup of the cycle before runs, then re-arms
		if p := gogc(); p > 300 {
			raised = p
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if raised == 0 {
		t.Fatal("GOGC never rose above 300 after the live heap fell from 128 MB")
	}
	stop()
	stop()
	runtime.GC()
	if p := gogc(); p != 300 {
		t.Fatalf("GOGC %d after stop, want 300", p)
	}
}

func TestStartWithGCOffDoesNothing(t *testing.T) {
	old := debug.SetGCPercent(-1)
	t.Cleanup(func() { debug.SetGCPercent(old) })
	stop := gcfloor.Start(time.Hour)
	runtime.GC()
	stop()
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Fatalf("GOGC %d, want off", p)
	}
}
