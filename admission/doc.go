// Package admission is the gate every request of the public API passes
// before its operation runs: who is calling, may they, and what the
// response headers say about their limits. It owns the key cache, the
// failed-authentication throttle, the rolling-window rate limit, the
// monthly quota, the order of the checks and the RateLimit, RateLimit-Policy
// and Retry-After values. The api maps an Outcome to HTTP; store holds the
// SQL it runs; cmd only wires it. In Redis it keeps the rolling windows
// of the rate limit, under the names package rediskeys gives them (that
// package lists every key and channel of the service, and whose each is);
// it listens on the invalidation bus (package invalidation) so that a
// revoked key or a changed client reaches its key cache at once.
//
// # Order of checks (Gate.Admit)
//
//  1. 401: the X-API-Key is missing, malformed (format or CRC32 checksum,
//     checked before any lookup), unknown or revoked.
//  2. 403: the client is suspended, or its contract has expired.
//  3. 429: the rolling window is full (Retry-After: until a slot frees).
//  4. 429: the monthly quota is spent (Retry-After: until the next month).
//
// The operation then checks its parameters (400), the market's tier (403)
// and what it reads (404). A request refused here is not counted; a
// request admitted here is counted against the quota whatever its later
// status. Every response of a client that reached step 3 carries
// RateLimit-Policy and RateLimit; every 429 carries Retry-After.
//
// # Invariants
//
//   - Rate limit: at most N admitted requests of a client in any 60-second
//     interval, across every api replica sharing Redis (an exact sliding log
//     stamped with the Redis server's clock; see slidingLogScript). Bursts
//     up to N are allowed. With Redis down each replica keeps its own exact
//     window (FallbackLimiter): at most R×N with R replicas, never a failed
//     request.
//   - Quota: a request is admitted only after its increment has committed in
//     Postgres; nothing admitted is lost when Redis or an api process dies,
//     and no replica admits past the quota (see QuotaLedger).
//   - Leases (busy clients far from their limits only): slots counted ahead
//     are inside the window and the quota before any is used, so they never
//     over-admit; unused ones are given back within leaseTTL, at Close, or
//     (a SIGKILLed replica) stay counted: an over-count of at most two
//     leases, never an under-count (see engine.go).
//   - Revocation and suspension reach every replica within a second (the
//     bus); the key cache's TTL (2 s) bounds them should the bus be down.
//     A key issued by `marketd keys issue` works at once on every replica.
//   - Unknown keys: a key with a valid checksum that does not exist costs
//     Postgres at most once per replica in unknownTTL, and only within its
//     source address's budget of failed authentications; past the budget its
//     failures are answered late and keys this replica does not know are
//     not looked up (429). A key that exists is never refused or slowed by
//     that throttle, from whatever address (see authThrottle, KeyCache).
//   - Every shared load (a key lookup, a batch) runs on a context of its
//     own: one client going away never fails another's request.
//   - Lifecycle: every goroutine is tracked; Close answers what is queued,
//     gives back unused leases and waits; time comes from the injected clock.
package admission
