package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"
)

// mintKeysLua makes every request carry a freshly minted key with a valid
// checksum (domain/apikey.go: "msk_" + 43 base62 characters + the 6-character
// base62 CRC32-IEEE of everything before it), so each one passes the format
// check and is unknown to the api: a flood that reaches the key lookup.
const mintKeysLua = `
local bit = require("bit")
local band, bxor, rshift = bit.band, bit.bxor, bit.rshift
local alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
local crcTable = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if band(c, 1) == 1 then c = bxor(rshift(c, 1), 0xEDB88320) else c = rshift(c, 1) end
  end
  crcTable[i] = c
end
local function crc32(s)
  local c = 0xFFFFFFFF
  for i = 1, #s do
    c = bxor(rshift(c, 8), crcTable[band(bxor(c, s:byte(i)), 0xFF)])
  end
  c = bxor(c, 0xFFFFFFFF)
  if c < 0 then c = c + 4294967296 end
  return c
end
local function digit(d) return alphabet:sub(d + 1, d + 1) end
local function base62(n, width)
  local out = {}
  for i = width, 1, -1 do
    out[i] = digit(n % 62)
    n = math.floor(n / 62)
  end
  return table.concat(out)
end
math.randomseed(os.time() + os.clock() * 1000000)
request = function()
  local body = {}
  for i = 1, 43 do body[i] = digit(math.random(0, 61)) end
  local key = "msk_" .. table.concat(body)
  key = key .. base62(crc32(key), 6)
  return wrk.format("GET", nil, {["X-API-Key"] = key})
end
`

// floodDuration is how long the flood (and each paying measurement) lasts.
const floodDuration = 6 * time.Second

// statsFlush is how long to wait before reading pg_stat_database: an idle
// backend reports its transactions within 10 s (PostgreSQL 15).
const statsFlush = 11 * time.Second

// runFlood measures a paying client's /usage alone, then beside an attacker
// that mints a fresh valid-checksum key for every request, from the same
// address (127.0.0.1), and how many transactions Postgres saw meanwhile.
// The attacker's wrk runs at nice 19 so that, both generators sharing
// core 0, the paying client's own generator is not what delays it.
func runFlood(ctx context.Context, o options, out io.Writer) (err error) {
	env, cleanup, err := prepare(ctx, o)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cleanup()) }()
	if err := checkMintedKeys(ctx, o); err != nil {
		return err
	}
	api, err := startAPI(ctx, o, env.vars, o.apiBin, o.cpuProfile, "api")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, api.stop()) }()
	usage := api.base + pathAliases["usage"]
	pay := wrkRun{url: usage, key: env.key, conns: o.payConns, duration: floodDuration}

	fmt.Fprintf(out, "## unknown-key flood %s UTC\n\n", time.Now().UTC().Format("2006-01-02 15:04"))
	fmt.Fprintf(out, "- machine: as above; load average %s at the start; api %s (tool commit %s)\n", loadAvg(), o.apiLabel, commit())
	fmt.Fprintf(out, "- paying client: %s -t1 -c%d on /usage for %s (warm-up %s first); attacker: wrk -t1 -c%d at nice 19, a fresh valid-checksum key per request (Lua), same address 127.0.0.1\n",
		wrkVersion(o), o.payConns, floodDuration, o.warmup, o.floodConns)
	fmt.Fprintf(out, "- Postgres transactions: pg_stat_database xact_commit+xact_rollback of the bench database, read before and %s after the run (stats flush); they include the api's readiness probes (≈ 1/s)\n", statsFlush)
	if o.pin {
		fmt.Fprintf(out, "- pinning: the api on core %d, both generators on core %d\n", serverCore(), wrkCore)
	}
	fmt.Fprintln(out)

	if o.warmup > 0 {
		w := pay
		w.duration = o.warmup
		if _, err := runWrk(ctx, o, w); err != nil {
			return err
		}
	}
	attacker := wrkRun{url: usage, conns: o.floodConns, duration: floodDuration, script: mintKeysLua, nice: 19}
	// phase runs the given generators together and returns their results
	// and the transactions Postgres committed meanwhile (and during the
	// stats flush after).
	phase := func(runs ...wrkRun) ([]wrkResult, int64, error) {
		x0, err := xactCount(ctx, o.databaseURL)
		if err != nil {
			return nil, 0, err
		}
		out := make([]wrkResult, len(runs))
		errs := make([]error, len(runs))
		var wg sync.WaitGroup
		for i, w := range runs {
			wg.Go(func() { out[i], errs[i] = runWrk(ctx, o, w) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, 0, err
		}
		if err := sleep(ctx, statsFlush); err != nil {
			return nil, 0, err
		}
		x1, err := xactCount(ctx, o.databaseURL)
		return out, x1 - x0, err
	}

	fmt.Fprintln(out, "| run | paying req/s | paying p50 | paying p99 | paying p99.9 | paying non-2xx / socket errors | attacker requests (req/s) | Postgres transactions |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|---:|")
	var failed []error
	var ratios []float64
	var floodXacts int64
	for r := 1; r <= o.runs; r++ {
		fmt.Fprintf(os.Stderr, "flood run %d/%d (load average %s)\n", r, o.runs, loadAvg())
		q, qx, err := phase(pay)
		if err != nil {
			return err
		}
		f, fx, err := phase(pay, attacker)
		if err != nil {
			return err
		}
		quiet, flooded, attack := q[0], f[0], f[1]
		fmt.Fprintf(out, "| %d quiet | %s | %s | %s | %s | %d / %d | – | %d |\n", r, thousands(quiet.rps()), us(quiet.P50), us(quiet.P99), us(quiet.P999),
			quiet.Status, quiet.socketErrors(), qx)
		fmt.Fprintf(out, "| %d flood | %s | %s | %s | %s | %d / %d | %d (%s) | %d |\n", r, thousands(flooded.rps()), us(flooded.P50), us(flooded.P99), us(flooded.P999),
			flooded.Status, flooded.socketErrors(), attack.Requests, thousands(attack.rps()), fx)
		ratios = append(ratios, float64(flooded.P99)/float64(max(quiet.P99, 1)))
		floodXacts = max(floodXacts, fx)
		if !quiet.valid() || flooded.Status != 0 || flooded.socketErrors() != 0 {
			failed = append(failed, fmt.Errorf("run %d: the paying client was refused or lost connections", r))
		}
	}
	a, ax, err := phase(attacker)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "| attacker alone | – | – | – | – | – | %d (%s) | %d |\n", a[0].Requests, thousands(a[0].rps()), ax)
	fmt.Fprintln(out)
	slices.Sort(ratios)
	mr := ratios[len(ratios)/2]
	fmt.Fprintf(out, "- paying p99 under the flood: median %.2f × quiet (goal ≤ 2: %s); paying refusals in every run: %s\n",
		mr, verdict(mr <= 2), verdict(len(failed) == 0))
	fmt.Fprintf(out, "- Postgres transactions: at most %d in a flood window (goal: a few thousand: %s), %d with the attacker alone\n",
		floodXacts, verdict(floodXacts <= 3000), ax)
	return errors.Join(failed...)
}

// checkMintedKeys runs the attacker's script for a second against a bare
// child that answers 204 to a well-formed key and 400 otherwise, so a bug in
// the Lua checksum cannot pass for a flood of unknown keys.
func checkMintedKeys(ctx context.Context, o options) error {
	bare, err := startBare(ctx, o, map[string]capturedBody{}, false)
	if err != nil {
		return err
	}
	defer bare.stop()
	r, err := runWrk(ctx, o, wrkRun{url: bare.base + keyCheckPath, conns: 2, duration: time.Second, script: mintKeysLua})
	if err != nil {
		return err
	}
	if r.Requests == 0 || r.Status != 0 {
		return fmt.Errorf("the minting script made %d of %d keys that fail domain.CheckKeyFormat", r.Status, r.Requests)
	}
	fmt.Fprintf(os.Stderr, "minting script: %d keys, all with a valid checksum\n", r.Requests)
	return nil
}

// keyCheckPath is where the bare child checks a key's format.
const keyCheckPath = "/keycheck"

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
