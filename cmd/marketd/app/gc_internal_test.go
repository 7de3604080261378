package app

import (
	"log/slog"
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
	dir := t.TempDir()
	cgroupMemoryMax = filepath.Join(dir, "memory.max")
	logger := slog.New(slog.DiscardHandler)
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }

	// No GOGC, no cgroup limit: the api's GOGC, no memory limit.
	tuneRoleGC(apiGOGC, env(nil), logger)
	if got := debug.SetGCPercent(100); got != apiGOGC {
		t.Fatalf("GOGC = %d, want %d", got, apiGOGC)
	}
	tuneRoleGC(workerGOGC, env(nil), logger)
	if got := debug.SetGCPercent(100); got != workerGOGC {
		t.Fatalf("GOGC = %d, want the worker's %d", got, workerGOGC)
	}
	if got := debug.SetMemoryLimit(-1); got != oldLimit {
		t.Fatalf("memory limit = %d without a cgroup limit, want it unchanged (%d)", got, oldLimit)
	}

	// GOGC set: the runtime's value stays.
	tuneRoleGC(apiGOGC, env(map[string]string{"GOGC": "100"}), logger)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("GOGC = %d with GOGC=100 in the environment", got)
	}

	// A cgroup limit ("max" is none): 80 % of it, unless GOMEMLIMIT is set.
	if err := os.WriteFile(cgroupMemoryMax, []byte("max\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tuneRoleGC(apiGOGC, env(nil), logger)
	if got := debug.SetMemoryLimit(-1); got != oldLimit {
		t.Fatalf("memory limit = %d with memory.max \"max\"", got)
	}
	if err := os.WriteFile(cgroupMemoryMax, []byte("1000000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tuneRoleGC(apiGOGC, env(map[string]string{"GOMEMLIMIT": "2GiB"}), logger)
	if got := debug.SetMemoryLimit(-1); got != oldLimit {
		t.Fatalf("memory limit = %d with GOMEMLIMIT set", got)
	}
	tuneRoleGC(apiGOGC, env(nil), logger)
	if got := debug.SetMemoryLimit(-1); got != 800000000 {
		t.Fatalf("memory limit = %d, want 80 %% of the cgroup's 1e9", got)
	}
}
