// Package rediskeys owns the service's Redis: the options every role
// connects with, and the name of every key and pub/sub channel it uses.
// A package that talks to Redis takes its names from here, so that one
// file answers "what is in our Redis, and whose is it", and a test proves
// that no two families can ever name the same key.
//
// Every key and channel starts with the deployment's prefix, a Space:
// empty in production, one of its own for each test, so that tests share a
// Redis server without sharing keys. asynq's keys are the exception: asynq
// names them itself ("asynq:…", AsynqNamespace) and takes no prefix, which
// is why a second pipeline (the sandbox's) needs a Redis database of its
// own rather than a prefix of its own.
//
// The families, by owner:
//
//   - admission: the rolling windows of the rate limit, RateLimit (with
//     ":leases" and ":weights" beside each client's window). The monthly
//     quota is counted in Postgres, not here.
//   - stream: the slots of each client's event streams, StreamSlots.
//   - hostbudget: the shared request budgets of the providers, HostBudget.
//   - worker: the lease and live marks of the push ingest (the exchanges'
//     pushed market data, not the clients' streams above)
//     (PushLease, PushLive, PushSeries, PushCatchUp) and the pipeline's pending sets,
//     generations and claims (ScorePending, ScoreGeneration, PipelineClaim).
//   - invalidation: the bus's channels, Invalidations (the service's read
//     caches and keys) and SandboxInvalidations (the sandbox servers' read
//     caches). Channels span every database of a Redis server, so the
//     sandbox's channel is a name of its own even though its pipeline's
//     keys live in a database of their own.
//   - asynq: its queues, tasks and servers under AsynqNamespace.
package rediskeys

import (
	"runtime"
	"time"
)

// Space is a deployment's key space: the prefix every key and channel of
// this package starts with ("" in production; each test its own).
type Space string

// The fixed heads of the families: a key of a family is its head after
// the prefix, then the family's own parts. No head is a prefix of another
// (TestFamiliesDisjoint), so keys of two families never meet.
const (
	rateLimitHead      = "ratelimit:{"
	streamSlotsHead    = "marketd:streams:"
	hostBudgetHead     = "marketd:budget:"
	pushLeaseKey       = "push:lease"
	pushLiveHead       = "push:live:"
	pushSeriesHead     = "push:series:"
	pushCatchUpHead    = "push:catchup:"
	scorePendingHead   = "pipeline:score:pending:"
	scoreGenHead       = "pipeline:score:gen:"
	pipelineClaimHead  = "pipeline:claim:"
	invalidateChannel  = "marketd:invalidate"
	sandboxInvalidated = "marketd:sandbox:invalidate"
)

// AsynqNamespace starts every key asynq writes (it takes no prefix).
const AsynqNamespace = "asynq:"

// AsynqQueues is asynq's registry of queue names, the set asynqmon and the
// queue metrics list (worker.KeepQueuesRegistered refills it).
const AsynqQueues = AsynqNamespace + "queues"

// RateLimit is the sorted set of a client's rolling window; its leases and
// their weights are RateLimit+":leases" and RateLimit+":weights". The
// braces keep the three in one slot of a Redis cluster, as the window's
// script needs.
func (s Space) RateLimit(clientID string) string {
	return string(s) + rateLimitHead + clientID + "}"
}

// StreamSlots is the sorted set of a client's open event streams.
func (s Space) StreamSlots(clientID string) string {
	return string(s) + streamSlotsHead + clientID
}

// HostBudget is the request log of one provider budget.
func (s Space) HostBudget(limit string) string {
	return string(s) + hostBudgetHead + limit
}

// PushLease is the lease of the one worker that holds the exchanges' push
// feeds (their websockets, OANDA's pricing stream).
func (s Space) PushLease() string { return string(s) + pushLeaseKey }

// PushLive marks the candles of a market's exchange as pushed live.
func (s Space) PushLive(market, exchange string) string {
	return string(s) + pushLiveHead + market + ":" + exchange
}

// PushSeries is the set of the symbols of a market's exchange and
// timeframe whose closed candles a websocket delivers ("*" for every
// symbol), where the exchange is not pushed live as a whole.
func (s Space) PushSeries(market, exchange, timeframe string) string {
	return string(s) + pushSeriesHead + market + ":" + exchange + ":" + timeframe
}

// PushCatchUp is the hash of where the push feeds' catch-up of a market's
// exchange and timeframe starts each series it has not finished (symbol →
// the open time it reads from, or none: its initial history).
func (s Space) PushCatchUp(market, exchange, timeframe string) string {
	return string(s) + pushCatchUpHead + market + ":" + exchange + ":" + timeframe
}

// ScorePending is the set of symbols of a market and style waiting for
// the pipeline's scoring.
func (s Space) ScorePending(market, style string) string {
	return string(s) + scorePendingHead + market + ":" + style
}

// ScoreGeneration counts the takes of ScorePending: the generation whose
// task takes the symbols pending now.
func (s Space) ScoreGeneration(market, style string) string {
	return string(s) + scoreGenHead + market + ":" + style
}

// PipelineClaim is the claim of a pipeline task id: the one worker that
// set it runs the task.
func (s Space) PipelineClaim(taskID string) string {
	return string(s) + pipelineClaimHead + taskID
}

// Invalidations is the bus's channel of the service: revoked and issued
// keys, changed clients, market data a write made stale.
func (s Space) Invalidations() string { return string(s) + invalidateChannel }

// SandboxInvalidations is the bus's channel of the sandbox: market data
// the sandbox pipeline's writes made stale, for the sandbox servers'
// caches only.
func (s Space) SandboxInvalidations() string { return string(s) + sandboxInvalidated }

// ClientOptions parses a redis:// URL into the options every role
// connects with. A dead or unreachable Redis must fail a request within
// ~200 ms (the gate's fallback limiter then answers) instead of stalling
// it for the go-redis defaults of seconds, and a failed script is not
// retried, since a retry after a lost reply could record a request, or
// claim a task, twice.
func ClientOptions(url string) (*Options, error) {
	opts, err := PlainOptions(url)
	if err != nil {
		return nil, err
	}
	opts.DialTimeout = 200 * time.Millisecond
	opts.ReadTimeout = 150 * time.Millisecond
	opts.WriteTimeout = 150 * time.Millisecond
	// Waiting for a pooled connection is load, not an outage: a large pool
	// and a long wait keep a burst from being mistaken for a dead Redis
	// (which would loosen the rate limit to per replica).
	opts.PoolSize = max(64, 10*runtime.GOMAXPROCS(0))
	opts.PoolTimeout = 2 * time.Second
	opts.MaxRetries = -1
	return opts, nil
}

// BackgroundClientOptions are ClientOptions for work no client waits on
// (the provider budgets, the pipeline's claims and pending sets): replies
// may take up to a second. On a machine busy with a cold start's history
// loads a reply can take longer than 150 ms, and the provider budget would
// take that for a dead Redis and fall back to a process's own share of the
// budget, starving the ticker refreshes behind it.
func BackgroundClientOptions(url string) (*Options, error) {
	opts, err := ClientOptions(url)
	if err != nil {
		return nil, err
	}
	opts.ReadTimeout, opts.WriteTimeout = time.Second, time.Second
	return opts, nil
}
