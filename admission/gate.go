package admission

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/invalidation"
	"github.com/marketscreener/market/obs"
	"github.com/marketscreener/market/rediskeys"
)

// The 429 details are the contract's own words.
const (
	RateLimitedDetail   = "Too Many Requests, retry later"
	QuotaExceededDetail = "Monthly quota exceeded; upgrade the tier or wait for the next month"
)

// The problem details of the gate's other refusals.
const (
	msgMissingKey   = "missing X-API-Key header"
	msgBadKeyFormat = "invalid API key: not a key issued by this service (format or checksum)"
	msgSuspended    = "client suspended; contact support"
	msgThrottled    = "too many failed authentications from your address; retry later"
)

// DefaultKeyTTL is the backstop of revocation when pub/sub is down: a
// revoked key or suspended client is refused within this time anyway.
const DefaultKeyTTL = 2 * time.Second

// KeyStore is where keys live (store.DB).
type KeyStore interface {
	// Authenticate finds a key by its hash with its client (see KeyLoader).
	Authenticate(ctx context.Context, keyHash string) (*domain.Client, *domain.APIKey, error)
	// KeyHashes lists the hashes of the keys created at or after since.
	KeyHashes(ctx context.Context, since time.Time) ([]string, error)
}

// Config wires a Gate.
type Config struct {
	// Redis holds the rolling windows and carries the bus (build it with
	// rediskeys.ClientOptions); Prefix is the deployment's key space
	// (rediskeys.Space: "" in production, each test its own).
	Redis  *redis.Client
	Prefix string
	Keys   KeyStore
	Usage  UsageStore
	// Data is told about market-data invalidations from the bus (optional).
	Data invalidation.DataCache
	// Now is the clock (time.Now when nil); Logger discards when nil.
	Now    func() time.Time
	Logger *slog.Logger
	// KeyTTL is the key cache's TTL (DefaultKeyTTL when 0).
	KeyTTL time.Duration
	// Throttle tunes the failed-authentication throttle.
	Throttle ThrottleConfig
	// LeaseMin lowers the smallest lease of the window and the ledger (tests).
	LeaseMin int
}

// Gate admits or refuses each request of the public API (see the package
// documentation for the order and the invariants).
type Gate struct {
	keys     *KeyCache
	listKeys KeyLister
	throttle *authThrottle
	rate     *FallbackLimiter
	window   *RollingWindowLimiter
	quota    *QuotaLedger
	away     *ledgerAway
	rdb      *redis.Client
	bus      *invalidation.Bus
	data     invalidation.DataCache
	now      func() time.Time
	// realClock: now is time.Now, so Request.Now may stand for a read.
	realClock bool
	logger    *slog.Logger
}

// New builds the gate. Run it to keep its caches fresh; Close it to flush
// the ledger and give back unused leases.
func New(cfg Config) *Gate {
	realClock := cfg.Now == nil
	if realClock {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.KeyTTL <= 0 {
		cfg.KeyTTL = DefaultKeyTTL
	}
	opts := Options{Now: cfg.Now, Logger: cfg.Logger}
	window := NewRollingWindowLimiter(cfg.Redis, cfg.Prefix, opts)
	quota := NewQuotaLedger(cfg.Usage, opts)
	window.LeaseMin, quota.LeaseMin = cfg.LeaseMin, cfg.LeaseMin
	// The cache is keyed by the binary SHA-256 of a key; the store and the
	// bus speak its hex form.
	keys := NewKeyCache(func(ctx context.Context, digest string) (*domain.Client, *domain.APIKey, error) {
		return cfg.Keys.Authenticate(ctx, hex.EncodeToString([]byte(digest)))
	}, cfg.KeyTTL, cfg.Now)
	keys.fromStore = func(h string) string {
		b, err := hex.DecodeString(h)
		if err != nil {
			return h // matches no key
		}
		return string(b)
	}
	return &Gate{
		keys:      keys,
		listKeys:  cfg.Keys.KeyHashes,
		throttle:  newAuthThrottle(cfg.Throttle, cfg.Now),
		rate:      NewFallbackLimiter(window, NewLocalLimiter(cfg.Now), cfg.Logger, cfg.Now),
		window:    window,
		quota:     quota,
		away:      newLedgerAway(quota, cfg.Usage, cfg.Logger, cfg.Now),
		rdb:       cfg.Redis,
		bus:       invalidation.NewBus(cfg.Redis, rediskeys.Space(cfg.Prefix), cfg.Logger),
		data:      cfg.Data,
		now:       cfg.Now,
		realClock: realClock,
		logger:    cfg.Logger,
	}
}

// Run keeps the key cache, its directory and the data cache in step with
// the bus, until ctx ends.
func (g *Gate) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.keys.runDirectory(ctx, g.listKeys, g.logger)
	}()
	err := g.bus.Run(ctx, g.keys, g.data)
	<-done
	return err
}

// Close flushes the ledger, gives back what leases did not use and waits
// for the key loads under way. Admit fails afterwards.
func (g *Gate) Close() {
	g.window.Close()
	g.quota.Close()
	g.away.close()
	g.keys.close()
}

// ErrRedisUnreachable is Probe's answer when Redis does not answer.
var ErrRedisUnreachable = errors.New("redis unreachable: rate limits fall back to per-replica windows")

// Probe is the gate's readiness check: Redis answers, the rate limiter is
// not on its per-replica fallback, and the key directory has loaded (until
// then unknown keys are looked up without throttling).
func (g *Gate) Probe(ctx context.Context) error {
	if err := g.rdb.Ping(ctx).Err(); err != nil {
		return ErrRedisUnreachable
	}
	if g.rate.Degraded() {
		return errors.New("rate limiter recovering from a Redis outage")
	}
	if !g.keys.directoryLoaded() {
		return errors.New("key directory not loaded yet: unknown keys are not throttled")
	}
	if !g.bus.Subscribed() {
		// Its first subscription empties the key cache: a replica in
		// rotation before it would drop the keys it had just read.
		return errors.New("invalidation bus not subscribed yet")
	}
	return nil
}

// Request is what the gate looks at.
type Request struct {
	// Key is the X-API-Key header as sent ("" when missing).
	Key string
	// RemoteAddr is the client's address ("ip:port"), for the throttle.
	RemoteAddr string
	// Now, when set, is the request's arrival as the caller read it from
	// the real clock: a gate on the real clock (Config.Now nil) takes it
	// instead of reading the clock again (one read serves a request's
	// layers). A gate on another clock (a test's) ignores it.
	Now time.Time
}

// Outcome is the gate's answer: admitted (Status 200) or the refusal, and
// what the response headers say either way.
type Outcome struct {
	// Status is http.StatusOK when admitted; otherwise 401, 403 or 429.
	Status int
	// Detail is the problem detail of a refusal.
	Detail string
	// Client and Key are the caller, once authenticated (shared: read only).
	Client *domain.Client
	Key    *domain.APIKey
	// Used is the month's count including this request, once admitted.
	Used int64
	// RateLimitPolicy, RateLimit and RetryAfter are the response headers
	// ("" = not sent). RateLimit headers go on every response of an
	// authenticated client that reached the limits, Retry-After on every 429.
	RateLimitPolicy string
	RateLimit       string
	RetryAfter      string
}

// Admitted reports whether the request may go on to its operation.
func (o Outcome) Admitted() bool { return o.Status == http.StatusOK }

// charge is what one request costs against the limits. Every request costs
// one slot of the window; every request of a live key one of the quota
// too, while a sandbox key's requests never count against the quota. (A
// batch read and a stream connection are one request each, like any.)
type charge struct {
	quota bool
}

func chargeOf(k *domain.APIKey) charge { return charge{quota: !k.Sandbox()} }

// Admit runs the checks in the documented order: 401 key (missing,
// malformed, unknown, revoked) → 403 client (suspended, contract expired)
// → 429 rate limit → 429 quota. Only a request that passes all of them is
// counted. An error is an outage (Postgres unreachable, ctx ended): the
// request is neither admitted nor refused.
func (g *Gate) Admit(ctx context.Context, r Request) (Outcome, error) {
	out, err := g.admit(ctx, r)
	obs.Admission(reasonOf(out, err))
	return out, err
}

func (g *Gate) admit(ctx context.Context, r Request) (Outcome, error) {
	if r.Key == "" {
		return g.refuseAuth(ctx, r, msgMissingKey), nil
	}
	if !domain.ValidKeyLen(len(r.Key)) {
		return g.refuseAuth(ctx, r, msgBadKeyFormat), nil
	}
	now := r.Now
	if !g.realClock || now.IsZero() {
		now = g.now()
	}
	client, key, policy, err := g.authenticate(ctx, r, now)
	switch {
	case err == errThrottled:
		return g.refuseThrottled(r), nil
	case err != nil && domain.ErrorCode(err) == domain.EUNAUTHORIZED:
		var de *domain.Error
		errors.As(err, &de)
		return g.refuseAuth(ctx, r, de.Message), nil
	case err != nil:
		return Outcome{}, err
	}
	if out, refused := refuseInactive(client, key, now); refused {
		return out, nil
	}
	if policy == "" {
		policy = policyHeader(client)
	}
	out := Outcome{Client: client, Key: key, RateLimitPolicy: policy}
	d, err := g.rate.allowAt(ctx, client.ID, client.RatePerMinute(), now)
	if err != nil {
		return Outcome{}, err
	}
	out.RateLimit = rateLimitHeader(d)
	if !d.Allowed {
		out.Status, out.Detail, out.RetryAfter = http.StatusTooManyRequests, RateLimitedDetail, retryAfterSeconds(d.RetryAfter)
		return out, nil
	}
	if !chargeOf(key).quota {
		out.Status = http.StatusOK
		return out, nil
	}
	// The wait is counted from now on the real clock (a few µs of key
	// lookup and rate limiting before it: below the histogram's first
	// bucket), which saves a clock read per request.
	t0 := now
	if !g.realClock {
		t0 = time.Now()
	}
	used, ok, err := g.admitQuota(ctx, client.ID, client.MonthlyQuota(), now)
	obs.QuotaWait(time.Since(t0))
	if err != nil {
		return Outcome{}, err
	}
	out.Used = used
	if !ok {
		out.Status, out.Detail, out.RetryAfter = http.StatusTooManyRequests, QuotaExceededDetail, retryAfterSeconds(domain.NextMonth(now).Sub(now))
		return out, nil
	}
	out.Status = http.StatusOK
	return out, nil
}

// admitQuota decides a metered request in the ledger or, while the
// ledger cannot commit, provisionally (ledgeraway.go).
func (g *Gate) admitQuota(ctx context.Context, clientID string, quota *int64, now time.Time) (int64, bool, error) {
	if g.away.active.Load() {
		if used, ok, away, err := g.away.admit(quotaKey{clientID: clientID, month: g.quota.monthOf(now)}, quota); away {
			return used, ok, err
		}
	}
	used, ok, err := g.quota.admitAt(ctx, clientID, quota, now, now)
	if err == nil || ctx.Err() != nil || errors.Is(err, errClosed) {
		return used, ok, err
	}
	k := quotaKey{clientID: clientID, month: g.quota.monthOf(now)}
	g.away.begin(k, err)
	if used, ok, away, err := g.away.admit(k, quota); away {
		return used, ok, err
	}
	return 0, false, err // closed meanwhile: the ledger's error
}

// refuseInactive is the 403 of a client suspended or past its contract
// end at now, if it is one.
func refuseInactive(client *domain.Client, key *domain.APIKey, now time.Time) (Outcome, bool) {
	switch client.EffectiveStatus(now) {
	case domain.StatusSuspended:
		return Outcome{Status: http.StatusForbidden, Detail: msgSuspended, Client: client, Key: key}, true
	case domain.StatusExpired:
		return Outcome{Status: http.StatusForbidden, Client: client, Key: key,
			Detail: "contract expired at " + client.ContractExpiresAt.Format(time.RFC3339) + "; contact sales to renew"}, true
	}
	return Outcome{}, false
}

// authenticate finds the key's client. A key in memory was issued here,
// so its checksum is not computed again; any other key's is, before any
// lookup, and a key that is not in the directory is looked up only within
// its address's budget. Past the budget the request is held back like a
// failure; if the key was announced meanwhile (issued a moment ago, the
// announcement a little behind the request) it is looked up then, else
// the answer is errThrottled.
func (g *Gate) authenticate(ctx context.Context, r Request, now time.Time) (*domain.Client, *domain.APIKey, string, error) {
	d := domain.KeyDigest(r.Key)
	f := g.keys.find(d[:], now)
	obs.KeyLookup(f.state == answered)
	if f.state == answered && f.err == nil {
		return f.client, f.key, f.policy, nil
	}
	if !domain.CheckKeyFormat(r.Key) {
		return nil, nil, "", errBadKeyFormat
	}
	switch f.state {
	case answered:
		return nil, nil, "", f.err
	case stranger:
		addr := addrKey(r.RemoteAddr)
		if ok, _ := g.throttle.mayLookUp(addr); !ok {
			g.throttle.failed(ctx, addr)
			if f = g.keys.find(d[:], g.now()); f.state == stranger {
				return nil, nil, "", errThrottled
			}
			if f.state == answered {
				return f.client, f.key, f.policy, f.err
			}
		}
	}
	client, key, err := g.keys.fetch(ctx, string(d[:]), f, now)
	return client, key, "", err
}

var errBadKeyFormat = domain.Errorf(domain.EUNAUTHORIZED, msgBadKeyFormat)

// refuseThrottled is the 429 of an address that spent its budget on keys
// this replica does not know (already held back).
func (g *Gate) refuseThrottled(r Request) Outcome {
	_, wait := g.throttle.peek(addrKey(r.RemoteAddr))
	obs.AuthThrottled()
	return Outcome{Status: http.StatusTooManyRequests, Detail: msgThrottled, RetryAfter: retryAfterSeconds(wait)}
}

// refuseAuth is a 401, held back when the address keeps failing.
func (g *Gate) refuseAuth(ctx context.Context, r Request, detail string) Outcome {
	g.throttle.failed(ctx, addrKey(r.RemoteAddr))
	return Outcome{Status: http.StatusUnauthorized, Detail: detail}
}

// policyHeader is the RateLimit-Policy of a client: the minute window and,
// when limited, the month.
func policyHeader(c *domain.Client) string {
	b := make([]byte, 0, 64)
	b = append(b, `"minute";q=`...)
	b = strconv.AppendInt(b, int64(c.RatePerMinute()), 10)
	b = append(b, ";w=60"...)
	if q := c.MonthlyQuota(); q != nil {
		b = append(b, `, "month";q=`...)
		b = strconv.AppendInt(b, *q, 10)
		b = append(b, ";w=2592000"...)
	}
	return string(b)
}

// rateLimitHeader is the RateLimit header: what is left of the minute
// window and the seconds until it next grows.
func rateLimitHeader(d Decision) string {
	b := make([]byte, 0, 32)
	b = append(b, `"minute";r=`...)
	b = strconv.AppendInt(b, int64(max(d.Remaining, 0)), 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, max(int64((d.Reset+time.Second-1)/time.Second), 0), 10)
	return string(b)
}

// retryAfterSeconds is a Retry-After value: whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(max(int64((d+time.Second-1)/time.Second), 1), 10)
}
