// Package e2e drives the real marketd roles like a client would, over HTTP,
// against real Postgres and Redis: containers from testcontainers-go when a
// Docker engine is reachable, otherwise the services named by
// MARKET_TEST_DATABASE_URL / MARKET_TEST_REDIS_URL (localhost defaults).
package e2e
