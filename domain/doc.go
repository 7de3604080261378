// Package domain holds the core types of the market screener and analytics
// service: markets, tiers, clients, API keys, market data, the region
// catalogue, validation and sentinel errors. It imports only the standard
// library (and pure computation helpers in its sub-packages); the packages
// around it (store, api, worker, feeds) translate to and from it.
package domain
