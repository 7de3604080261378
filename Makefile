# The two set-up commands on a fresh machine are `docker compose up --build`
# (run the service) and `make test` (run the tests). The rest are helpers.
SHELL := /bin/bash
GO ?= go
BIN := bin/marketd
# The TypeScript package (clients/typescript/README.md).
TS_CLIENT := clients/typescript

export MARKET_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
export MARKET_REDIS_URL ?= redis://127.0.0.1:6379/0
export MARKET_HTTP_ADDR ?= :8080
export MARKET_OPS_ADDR ?= 127.0.0.1:8081
export MARKET_FEEDS ?= synthetic
# A development key for webhook secrets, made once and kept out of git.
export MARKET_SECRET_KEY ?= $(shell test -f .marketd-dev-secret || od -An -tx1 -N32 /dev/urandom | tr -d ' \n' > .marketd-dev-secret; cat .marketd-dev-secret)

.PHONY: build test test-deps test-short vet fmt generate lint-openapi run bench bench-api bench-flood bench-deps bench-webhooks bench-latency bench-stream bench-stream-replay bench-stream-hold bench-scale bench-scale-bins bench-markets bench-markets-session bench-markets-midnight bench-migrate-locks bench-compact bench-import bench-screen bench-ha bench-histstats bench-alerts clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) ./cmd/marketd

## test: every test against the real Postgres and Redis (MARKET_TEST_DATABASE_URL / MARKET_TEST_REDIS_URL or localhost).
## The e2e suite runs on testcontainers when a Docker engine answers (make docker starts one), on the
## local services otherwise; the last line says which (go test hides a passing package's output).
test: test-deps test-images helm
	$(GO) vet ./...
	cd $(HELM_TEST) && $(GO) vet ./... && $(GO) test -race -count=1 ./...
	npm --prefix $(TS_CLIENT) test
	npm --prefix $(TS_CLIENT) run --silent lint-openapi
	@mkdir -p bin && rm -f bin/e2e-path
	MARKET_E2E_REPORT=$(CURDIR)/bin/e2e-path $(GO) test -race -count=1 -timeout 15m ./...
	$(GO) test -tags benchclock -count=1 -run TestBenchClockOffset ./cmd/marketd/app
	@cat bin/e2e-path 2>/dev/null || true

.PHONY: test-images docker compose-check helm helm-sync helm-check

# The Helm chart and its test, a Go module of its own (k8s.io/api stays out of the service's go.mod).
HELM_CHART := deploy/helm/marketd
HELM_TEST := deploy/helm

## helm: bin/helm (.ci/helm: built from the Go module proxy once, then copied from ~/.cache/marketd-tools).
helm:
	@.ci/helm >/dev/null

## helm-sync: copy ops/alerts.yml into the chart (its PrometheusRule); the chart's test fails while they differ.
helm-sync:
	cp ops/alerts.yml $(HELM_CHART)/files/alerts.yml

## helm-check: the chart's test alone: helm lint --strict, helm template of the default and the HA values,
## every object decoded strictly into its k8s.io/api (or prometheus-operator) type (make test runs it too).
helm-check: helm
	cd $(HELM_TEST) && $(GO) test -race -count=1 ./...

# The images of the e2e suite's testcontainers path.
E2E_IMAGES := postgres:16-alpine redis:7-alpine

## test-images: when a Docker engine answers, the e2e images: present, pulled, or stand-ins built from Debian packages (cached).
test-images:
	@if timeout 10 docker info >/dev/null 2>&1; then \
	  .ci/docker-images $(E2E_IMAGES) || echo "test: the e2e images cannot be had: the e2e suite uses the local services"; fi

## docker: make a Docker engine answer: install Debian's docker.io and start dockerd when none does (root).
docker:
	.ci/docker-engine

## compose-check: prove `docker compose up --build` end to end, with timings (docs/ci.md).
compose-check:
	.ci/compose-check

## test-deps: the docs-page test renders /docs in Debian's headless chromium; install it when missing.
## The alert-rules test runs promtool when present: it is taken out of Debian's prometheus package
## (the binary only: no Prometheus daemon is installed or started); without it the test still checks
## the rules' structure and names.
## The TypeScript package's tools (tsc, openapi-typescript) and the OpenAPI linters (Redocly, Spectral) are its
## devDependencies, pinned in its package-lock.json: installed when missing or older than the lock.
test-deps: $(TS_CLIENT)/node_modules/.package-lock.json
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium for the docs-page test"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@command -v promtool >/dev/null 2>&1 || { \
	  echo "extracting promtool from Debian's prometheus package for the alert-rules test"; \
	  d=$$(mktemp -d) && cd $$d && { apt-get download prometheus >/dev/null 2>&1 || \
	    { apt-get update -qq && apt-get download prometheus >/dev/null 2>&1; }; } && \
	  dpkg -x prometheus_*.deb x && install -m 0755 x/usr/bin/promtool /usr/local/bin/promtool; \
	  rm -rf $$d; command -v promtool >/dev/null 2>&1 || echo "promtool unavailable: the alert test checks structure and names only"; }

$(TS_CLIENT)/node_modules/.package-lock.json: $(TS_CLIENT)/package-lock.json
	npm --prefix $(TS_CLIENT) ci --prefer-offline --no-audit --no-fund

## generate: rewrite what is generated from the api's OpenAPI document: clients/openapi.json, the Go client
## (client/client.gen.go, by the oapi-codegen go.mod pins) and the TypeScript types (clients/typescript/src/schema.ts).
## TestGeneratedFromDocument and the TypeScript package's test fail until it is run.
generate: $(TS_CLIENT)/node_modules/.package-lock.json
	$(GO) test ./client -run TestGeneratedFromDocument -count=1 -update
	npm --prefix $(TS_CLIENT) run --silent generate

## bench-alerts: a close of 2,000 crypto assets (four styles, 00:00 UTC) with 10,000 alerts of 100 clients, the
## same close without alerts (the baseline), then a quarter-hour's close (scalp alone) with the alerts:
## close → alert committed p50/p95/max and the CPU per close (BENCHMARKS.md).
## The collector as the chart's worker runs it (cmd/marketd/app/gc.go: GOGC off under its GOMEMLIMIT), which a test
## binary does not apply by itself.
BENCH_ALERTS_GC := GOGC=off GOMEMLIMIT=1600MiB
bench-alerts:
	$(BENCH_ALERTS_GC) BENCH_CLOSE_ASSETS=2000 BENCH_CLOSE_ALERTS=0 $(GO) test ./worker -run '^$$' -bench CloseAlerts -benchtime 2x -timeout 30m
	$(BENCH_ALERTS_GC) BENCH_CLOSE_ASSETS=2000 BENCH_CLOSE_ALERTS=10000 $(GO) test ./worker -run '^$$' -bench CloseAlerts -benchtime 2x -timeout 30m
	$(BENCH_ALERTS_GC) BENCH_CLOSE_ASSETS=2000 BENCH_CLOSE_ALERTS=10000 BENCH_CLOSE_STYLES=scalp $(GO) test ./worker -run '^$$' -bench CloseAlerts -benchtime 3x -timeout 30m

## lint-openapi: Redocly's and Spectral's recommended rules on clients/openapi.json (make test runs it too).
lint-openapi: $(TS_CLIENT)/node_modules/.package-lock.json
	npm --prefix $(TS_CLIENT) run --silent lint-openapi

test-short:
	$(GO) test -count=1 ./...

vet:
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

## run: without Docker, against local Postgres/Redis: migrate, the demo client (created once) and a new key for it, every role.
run: build
	$(BIN) migrate
	@$(BIN) demo-key --org Demo --new-key
	$(BIN) all

## bench: Go benchmarks of the hot paths (see BENCHMARKS.md).
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./domain/... ./store/... ./admission/... ./readcache/... ./api/... ./feeds/...

## bench-api: wrk (its own process, pinned apart) against two bare net/http handlers (one serving the
## api's exact bytes, headers included; one sending the body with its Content-Type only) and the real
## api, three runs of /usage, the screener, OHLCV and the analytics report; prints a Markdown table
## (see BENCHMARKS.md). BENCH_ARGS passes flags, e.g. BENCH_ARGS="-runs 1 -paths usage".
bench-api: bench-deps
	$(GO) run ./e2e/cmd/loadtest $(BENCH_ARGS)

## bench-screen: POST /screener/query over 13,000 crypto assets against the bare handler serving the
## same bytes, as bench-api (see BENCHMARKS.md). BENCH_ARGS passes flags, e.g. BENCH_ARGS="-runs 1 -query-assets 2000".
bench-screen: bench-deps
	$(GO) run ./e2e/cmd/loadtest -paths query $(BENCH_ARGS)

## bench-flood: a paying client beside an attacker minting a fresh valid-checksum key per request.
bench-flood: bench-deps
	$(GO) run ./e2e/cmd/loadtest -flood $(BENCH_ARGS)

## bench-deps: the load generator is Debian's wrk; install it when missing.
bench-deps:
	@command -v wrk >/dev/null 2>&1 || { \
	  echo "installing wrk"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }

## bench-webhooks: the webhook dispatcher: 1,000 subscriptions x one verdict change to a local https receiver (see BENCHMARKS.md).
bench-webhooks:
	$(GO) run ./e2e/cmd/webhookbench

## bench-latency: candle -> verdict event -> https receiver latency, cold start and CPU of `marketd all`
## (synthetic feed; see BENCHMARKS.md). BASELINE=path/to/marketd measures that binary too (e.g. main's);
## BENCH_ARGS passes flags. Takes ~8 minutes per binary. On a shared machine, BENCH_LOCK=file runs it under
## flock(1) on that file, so benchmarks never overlap. The scoring cost of the trigger against ticks alone, same
## binary, same window: BENCH_ARGS="-together -variant MARKET_SCORE_TRIGGER=false -cpu-window 30m -settle 2m".
bench-latency: build
	$(GO) build -o bin/latencybench ./e2e/cmd/latencybench
	$(if $(BENCH_LOCK),flock $(BENCH_LOCK)) bin/latencybench -bin $(BIN) $(if $(BASELINE),-baseline $(BASELINE)) $(BENCH_ARGS)

## bench-compact: compact candle storage (issue #37 part 4): bytes per candle as rows and packed in candle_blocks,
## the mover's rate, and GET /ohlcv's read in the hot window, across the boundary and in the blocks, today's table
## against the packed layout in the same run (store reads in process, then `marketd api` under wrk); see BENCHMARKS.md.
bench-compact: build bench-deps
	$(GO) run ./e2e/cmd/compactbench -bin $(BIN) $(BENCH_ARGS)

## bench-migrate-locks: each migration's locks on seeded tables (modes taken, longest stretch stopping reads
## or writes, 00020 batched against as landed; BENCHMARKS.md, "Migration locks"). MARKET_LOCKS_SCALE multiplies
## the sizes (default here 10: 200,000 candles, 20,000 archived reports; scale 1 is what go test runs).
bench-migrate-locks:
	MARKET_LOCKS_SCALE=$${MARKET_LOCKS_SCALE:-10} $(GO) test -count=1 -timeout 30m -run 'TestMigrationLocks$$' -v ./store/

## bench-ha: the HA harness (e2e/ha; BENCHMARKS.md, "High availability"): Postgres primary + streaming replica,
## Redis primary + replica + 3 sentinels, HAProxy before 2 api, 2 workers, 2 schedulers, a load generator of its
## own; SIGKILLs an api, a worker, a scheduler, the Redis primary, the Postgres primary, then rolls every
## process; per fault the non-2xx and their window, then 0 candles / stream events / webhooks lost.
## .ci/ha-deps installs redis-sentinel and haproxy when missing. Ports 27000-27999, data in a temp dir.
## ~6 minutes. HA_ARGS passes flags (-short, -keep -dir DIR to keep every process's log).
bench-ha: build
	.ci/ha-deps
	$(GO) build -o bin/ha ./e2e/ha
	bin/ha -marketd $(BIN) -json bin/ha.json $(HA_ARGS)

## bench-histstats: the statistics job over HISTSTATS_YEARS (5) years of daily candles of HISTSTATS_ASSETS (1,600)
## synthetic assets written into a schema of its own: the whole computation, one new day, and the median interval
## width of the verdict records from 400 candles against the whole history (BENCHMARKS.md, "Statistics over the
## whole history"). HISTSTATS_WORKERS assets are judged at once (default GOMAXPROCS).
bench-histstats:
	BENCH_HISTSTATS=1 $(GO) test -count=1 -timeout 3h -run '^TestBenchHistStats$$' -v ./worker/

## bench-scale: `marketd all` against the local Binance simulator (1,200 spot + 400 perpetual, REST and websockets),
## both processes of their own: cold start to every report, closed candle -> /ohlcv and -> rescored report
## latencies, CPU per minute, Postgres growth a day, peak weight per budget, 429s/418s (see BENCHMARKS.md).
## Takes ~10-20 minutes (the window reaches a 15-minute close). BENCH_ARGS passes flags, e.g.
## -synthetic MARKET_SYNTHETIC_ASSETS=2000 for the same figures on the synthetic feed; BENCH_LOCK as above.
## -clock-at 23:35 -until 00:07 takes in the daily close at any hour: both processes run on a clock shifted to
## 23:35 at the start (the simulator's -clock-offset, marketd's MARKET_BENCH_CLOCK_OFFSET in a benchclock build).
bench-scale: bench-scale-bins
	$(if $(BENCH_LOCK),flock $(BENCH_LOCK)) bin/scalebench -bin $(BIN) -clock-bin bin/marketd-benchclock -sim-bin bin/exchangesim $(BENCH_ARGS)

## bench-import: `marketd import` of the simulator's public data archive (1d, 4h and 1h, IMPORT_MONTHS months of
## IMPORT_SYMBOLS spot pairs; 60 and 80 by default: a twentieth of issue #37's 1,600 symbols; past the universe's 1,200
## pairs, archive-only pairs delisted in the archive's last year, so 1600 is the issue's size) under nice -n 10, while
## `marketd all` ingests the 1,200-pair universe live: time, candles a second, candles table bytes a candle, and
## the closed 1m candle -> GET /ohlcv latency before the import (the baseline: -window 4m after the warm-up) and
## while it runs (goal p95 < 3 s); the window lasts until the import ends. BENCH_ARGS and BENCH_LOCK as for bench-scale.
IMPORT_MONTHS ?= 60
IMPORT_SYMBOLS ?= 80
bench-import: bench-scale-bins
	$(if $(BENCH_LOCK),flock $(BENCH_LOCK)) bin/scalebench -bin $(BIN) -clock-bin bin/marketd-benchclock -sim-bin bin/exchangesim \
		-import-months $(IMPORT_MONTHS) -import-symbols $(IMPORT_SYMBOLS) -window 4m -extend=false $(BENCH_ARGS)

bench-scale-bins: build
	CGO_ENABLED=0 $(GO) build -trimpath -tags benchclock -o bin/marketd-benchclock ./cmd/marketd
	$(GO) build -o bin/exchangesim ./e2e/cmd/exchangesim
	$(GO) build -o bin/scalebench ./e2e/cmd/scalebench

## bench-markets: the three markets at once against the simulators (issue #34, "Measure it"): crypto from the
## Binance simulator (2,000 spot + 400 perpetual), stocks from the Alpaca one (11,500 active equities, the free
## plan: 200 data requests a minute, IEX), forex from the OANDA one (68 pairs), in one `marketd all`. Two phases on
## a clock shifted to a Tuesday (-clock-at takes a date): the session and its 16:00 New York close (20:28-21:04 UTC,
## bench-markets-session, ~40 minutes) and the 00:00 UTC crypto close (23:40-00:04, bench-markets-midnight, ~25
## minutes). Each prints every goal's figure with met / NOT met: the cold starts (stock and forex screeners < 2 min,
## every stock with enough history reported < 20 min), closed 1m bar -> GET /ohlcv (crypto, streamed and polled
## stocks, forex), the closes' rescoring, the budgets' peaks and 429s after the warm-up, CPU, RSS, Postgres growth.
## BENCH_ARGS is added to both phases (e.g. -nice -10); BENCH_LOCK as above.
MARKETS_ARGS = -markets crypto,stocks,forex -spot 2000 -perpetual 400 -alpaca-assets 11500 -alpaca-plan free -oanda-pairs 68 -window 1m -cold-limit 25m
bench-markets: bench-markets-session bench-markets-midnight

bench-markets-session: bench-scale-bins
	$(if $(BENCH_LOCK),flock $(BENCH_LOCK)) bin/scalebench -bin $(BIN) -clock-bin bin/marketd-benchclock -sim-bin bin/exchangesim \
		$(MARKETS_ARGS) -clock-at 2026-12-01T20:28 -warmup-until 20:58 -until 21:04 $(BENCH_ARGS)

bench-markets-midnight: bench-scale-bins
	$(if $(BENCH_LOCK),flock $(BENCH_LOCK)) bin/scalebench -bin $(BIN) -clock-bin bin/marketd-benchclock -sim-bin bin/exchangesim \
		$(MARKETS_ARGS) -clock-at 2026-12-01T23:40 -warmup-until 23:58 -until 00:04 $(BENCH_ARGS)

## bench-stream: the event stream: a verdict change to 500 open streams over 2 api replicas, against a bare SSE broadcaster (see BENCHMARKS.md).
bench-stream: build
	$(GO) run ./e2e/cmd/streambench -marketd bin/marketd

## bench-stream-replay: 16 streams of one key replaying a full 48 h log from its oldest id while another client's GET /usage is measured (p99, non-200) and the api's stream queries are timed (see BENCHMARKS.md).
bench-stream-replay: build
	$(GO) run ./e2e/cmd/streambench -marketd bin/marketd -mode replay $(BENCH_ARGS)

## bench-stream-hold: the longest gap between screener events on a live stream while a transaction of another database and an idle one of this database hold xids for 30 s (see BENCHMARKS.md).
bench-stream-hold: build
	$(GO) run ./e2e/cmd/streambench -marketd bin/marketd -mode hold $(BENCH_ARGS)

clean:
	rm -rf bin
