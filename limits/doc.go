// Package limits enforces what clients pay for, in front of every
// authenticated request: the per-minute rate limit (a sliding log in Redis,
// exact across api replicas, with an in-process fallback while Redis is
// down) and the in-process cache of authenticated API keys with
// cross-replica invalidation over Redis pub/sub. It is the only package,
// besides asynq's internals, that talks to Redis.
//
// The monthly quota is not here: it is a durable count and lives in
// Postgres (store.QuotaLedger), so losing Redis loses no admitted request.
package limits
