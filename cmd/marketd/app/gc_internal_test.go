package app

import (
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestTuneRoleGC(t *testing.T) {
	old := debug.SetGCPercent(100)
	oldLimit := debug.SetMemoryLimit(-1)
	oldPath := cgroupMemoryMax
	t.Cleanup(func() {
		debug.SetGCPercent(old)
		debug.SetMemoryLimit(oldLimit)
		cgroupMemoryMax = oldPath
	})
	debug.SetMemoryLimit(math.MaxInt64) // none, whatever GOMEMLIMIT the test runs with
	dir := t.TempDir()
	cgroupMemoryMax = filepath.Join(dir, "memory.max")
	logger := slog.New(slog.DiscardHandler)
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }

	// No GOGC, no cgroup limit: the api's GOGC, no memory limit.
	tuneRoleGC(apiGOGC, false, env(nil), logger)
	if got := debug.SetGCPercent(100); got != apiGOGC {
		t.Fatalf("GOGC = %d, want %d", got, apiGOGC)
	}
	tuneRoleGC(workerGOGC, true, env(nil), logger)
	if got := debug.SetGCPercent(100); got != workerGOGC {
		t.Fatalf("GOGC = %d, want the worker's %d", got, workerGOGC)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("memory limit = %d without a cgroup limit, want none", got)
	}

	// GOGC set: the runtime's value stays.
	tuneRoleGC(apiGOGC, false, env(map[string]string{"GOGC": "100"}), logger)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC = %d with GOGC=100 in the environment", got)
	}

	// A cgroup limit ("max" is none): 80 % of it, unless GOMEMLIMIT is set.
	if err := os.WriteFile(cgroupMemoryMax, []byte("max\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tuneRoleGC(apiGOGC, false, env(nil), logger)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("memory limit = %d with memory.max \"max\"", got)
	}
	if err := os.WriteFile(cgroupMemoryMax, []byte("1000000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tuneRoleGC(apiGOGC, false, env(map[string]string{"GOMEMLIMIT": "2GiB"}), logger)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("memory limit = %d with GOMEMLIMIT set", got)
	}
	tuneRoleGC(apiGOGC, false, env(nil), logger)
	if got := debug.SetMemoryLimit(-1); got != 800000000 {
		t.Fatalf("memory limit = %d, want 80 %% of the cgroup's 1e9", got)
	}
	if got := debug.SetGCPercent(100); got != apiGOGC {
		t.Fatalf("api's GOGC = %d under a memory limit, want %d", got, apiGOGC)
	}

	// The worker under the cgroup's limit alone: the limit, GOGC 300 (the
	// cgroup may be shared by other processes).
	debug.SetMemoryLimit(math.MaxInt64)
	tuneRoleGC(workerGOGC, true, env(nil), logger)
	if got, lim := debug.SetGCPercent(100), debug.SetMemoryLimit(-1); got != workerGOGC || lim != 800000000 {
		t.Fatalf("worker under the cgroup's limit: GOGC = %d, limit %d; want %d and 80 %% of 1e9", got, lim, workerGOGC)
	}
	// GOGC set: the cgroup's limit still applies.
	debug.SetMemoryLimit(math.MaxInt64)
	debug.SetGCPercent(123) // as the runtime applied GOGC=123
	tuneRoleGC(workerGOGC, true, env(map[string]string{"GOGC": "123"}), logger)
	if got, lim := debug.SetGCPercent(100), debug.SetMemoryLimit(-1); got != 123 || lim != 800000000 {
		t.Fatalf("worker with GOGC=123 under the cgroup's limit: GOGC = %d, limit %d", got, lim)
	}

	// The worker under GOMEMLIMIT (which the runtime has applied): GOGC
	// off, unless GOGC is set.
	debug.SetMemoryLimit(2 << 30)
	tuneRoleGC(workerGOGC, true, env(map[string]string{"GOMEMLIMIT": "2GiB"}), logger)
	if got, lim := debug.SetGCPercent(100), debug.SetMemoryLimit(-1); got != -1 || lim != 2<<30 {
		t.Fatalf("worker with GOMEMLIMIT=2GiB: GOGC = %d, limit %d; want off (-1) and 2 GiB", got, lim)
	}
	debug.SetGCPercent(123)
	tuneRoleGC(workerGOGC, true, env(map[string]string{"GOMEMLIMIT": "2GiB", "GOGC": "123"}), logger)
	if got := debug.SetGCPercent(100); got != 123 {
		t.Fatalf("worker with GOGC=123 set: GOGC = %d", got)
	}
	// GOMEMLIMIT=off: no limit, not the cgroup's either; GOGC 300.
	debug.SetMemoryLimit(math.MaxInt64)
	tuneRoleGC(workerGOGC, true, env(map[string]string{"GOMEMLIMIT": "off"}), logger)
	if got, lim := debug.SetGCPercent(100), debug.SetMemoryLimit(-1); got != workerGOGC || lim != math.MaxInt64 {
		t.Fatalf("worker with GOMEMLIMIT=off: GOGC = %d, limit %d; want %d and none", got, lim, workerGOGC)
	}
	// The api under GOMEMLIMIT keeps its GOGC.
	debug.SetMemoryLimit(2 << 30)
	tuneRoleGC(apiGOGC, false, env(map[string]string{"GOMEMLIMIT": "2GiB"}), logger)
	if got := debug.SetGCPercent(100); got != apiGOGC {
		t.Fatalf("api with GOMEMLIMIT=2GiB: GOGC = %d, want %d", got, apiGOGC)
	}
}
