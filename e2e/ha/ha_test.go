package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain makes the test binary the load generator when the harness runs
// it as one (a process of its own, as in make bench-ha).
func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "loadgen" {
		if err := runLoadgen(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testLog writes the harness's progress to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestHAShort is the harness's short run on real components (Debian's
// redis-sentinel and haproxy, installed by .ci/ha-deps when missing;
// Postgres clusters of its own): an api replica SIGKILLed behind HAProxy
// and the Redis primary SIGKILLed (the sentinels promote its replica),
// under load from a process of its own. Nothing may be lost: every
// verdict event written reaches each held /stream once (resumed with
// Last-Event-ID) and the webhook receiver once, and every stored closed
// candle equals the synthetic feed's. Killing one api replica behind
// HAProxy must cost clients nothing (HAProxy retries a failed connection
// on the other replica).
func TestHAShort(t *testing.T) {
	if testing.Short() {
		t.Skip("the HA harness runs a deployment of ten processes")
	}
	if out, err := exec.Command("../../.ci/ha-deps").CombinedOutput(); err != nil {
		t.Skipf("the Debian components cannot be installed: %v: %s", err, out)
	}
	res, err := Run(t.Context(), Options{Short: true, Log: testLog{t}})
	if errors.Is(err, errSkip) {
		t.Skip(err)
	}
	if res != nil {
		t.Logf("\n%s", res.Table())
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Problems {
		t.Error(p)
	}
	for _, f := range res.Faults {
		if strings.HasPrefix(f.Name, "SIGKILL an api") && f.Non2xx > 0 {
			t.Errorf("%s: %d non-2xx answers (%v), want none: %v", f.Name, f.Non2xx, f.Codes, f.Examples)
		}
	}
}
