package app_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/redistest"
)

// These tests drive the limits of DESIGN §3 through the real program: two
// `marketd api` processes (in-process, port 0) on one schema and one Redis
// database, the operator CLI for every change, and plain HTTP from outside.

const (
	detailRateLimited = "Too Many Requests, retry later"
	detailQuota       = "Monthly quota exceeded; upgrade the tier or wait for the next month"
)

// answer is one HTTP exchange made off the test goroutine (no t.Fatal there).
type answer struct {
	status int
	header http.Header
	body   map[string]any
	err    error
}

func (a answer) detail() string { s, _ := a.body["detail"].(string); return s }

// httpClient keeps enough idle connections for a burst, and closes them
// when the test ends so the servers shut down at once.
func httpClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func fetch(c *http.Client, url, key string) answer {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("X-API-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{err: err}
	}
	if err := json.Unmarshal(b, &a.body); err != nil {
		a.err = fmt.Errorf("body %q: %w", b, err)
	}
	return a
}

// burst sends n GETs of path at once (released together), the i-th to
// bases[i%len(bases)], and returns the answers in that order.
func burst(t *testing.T, c *http.Client, bases []string, path, key string, n int) []answer {
	t.Helper()
	out := make([]answer, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = fetch(c, bases[i%len(bases)]+path, key)
		}()
	}
	close(start)
	wg.Wait()
	for i, a := range out {
		if a.err != nil {
			t.Fatalf("request %d: %v", i, a.err)
		}
	}
	return out
}

// twoAPIs starts two api processes on env's schema and Redis database and
// returns the public base URL of each.
func twoAPIs(t *testing.T, env map[string]string) []string {
	t.Helper()
	var bases []string
	for range 2 {
		srv := startServer(t, env, "api")
		waitReady(t, srv)
		bases = append(bases, "http://"+srv.HTTPAddr()+"/api/v1/public")
	}
	return bases
}

// newClient creates a client with the given clients-create flags and one
// key, and returns both.
func newClient(t *testing.T, env map[string]string, flags ...string) (id, key string) {
	t.Helper()
	id = mustRun(t, env, append([]string{"clients", "create", "--org", t.Name()}, flags...)...)
	return id, mustRun(t, env, "keys", "issue", "--client", id)
}

func usedThisMonth(t *testing.T, env map[string]string, clientID string) int64 {
	t.Helper()
	var shown struct {
		UsedThisMonth *int64 `json:"used_this_month"`
	}
	out := mustRun(t, env, "clients", "show", clientID, "--json")
	if err := json.Unmarshal([]byte(out), &shown); err != nil || shown.UsedThisMonth == nil {
		t.Fatalf("clients show --json: %q (%v)", out, err)
	}
	return *shown.UsedThisMonth
}

var rateLimitHeader = regexp.MustCompile(`^"minute";r=(\d+);t=(\d+)$`)

// checkRateLimitHeaders asserts the IETF draft headers of an authenticated
// response and returns r (requests left) and t (seconds until one frees).
func checkRateLimitHeaders(t *testing.T, a answer, policy string) (left, reset int) {
	t.Helper()
	if got := a.header.Get("RateLimit-Policy"); got != policy {
		t.Errorf("status %d: RateLimit-Policy %q, want %q", a.status, got, policy)
	}
	m := rateLimitHeader.FindStringSubmatch(a.header.Get("RateLimit"))
	if m == nil {
		t.Errorf("status %d: RateLimit %q, want \"minute\";r=<n>;t=<s>", a.status, a.header.Get("RateLimit"))
		return -1, -1
	}
	left, _ = strconv.Atoi(m[1])
	reset, _ = strconv.Atoi(m[2])
	return left, reset
}

// retryAfter parses the Retry-After of a 429: whole seconds, at least 1.
func retryAfter(t *testing.T, a answer) int64 {
	t.Helper()
	v := a.header.Get("Retry-After")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		t.Errorf("Retry-After %q: want an integer ≥ 1", v)
		return -1
	}
	return n
}

func tally(as []answer) map[int]int {
	n := map[int]int{}
	for _, a := range as {
		n[a.status]++
	}
	return n
}

// A starter client (30/min) firing 100 requests at once at two replicas
// gets exactly 30 admitted: the window lives in the shared Redis.
func TestLimitsRateLimitSharedByTwoInstances(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	mustRun(t, env, "migrate")
	_, key := newClient(t, env, "--tier", "starter", "--markets", "crypto")
	bases := twoAPIs(t, env)
	c := httpClient(t)
	const policy = `"minute";q=30;w=60, "month";q=20000;w=2592000`

	answers := burst(t, c, bases, "/usage", key, 100)
	if n := tally(answers); n[200] != 30 || n[429] != 70 || len(n) != 2 {
		t.Fatalf("100 requests at once: %v, want exactly 30 × 200 and 70 × 429", n)
	}
	leftSeen := map[int]bool{}
	var used []int64
	maxRetry := int64(0)
	for _, a := range answers {
		left, reset := checkRateLimitHeaders(t, a, policy)
		switch a.status {
		case 200:
			// Each admission is one atomic step of one shared window: the
			// 30 admitted requests saw 29, 28, ..., 0 requests left.
			leftSeen[left] = true
			used = append(used, int64(a.body["used_this_month"].(float64)))
			if reset < 1 || reset > 60 {
				t.Errorf("200: RateLimit t=%d, want 1..60", reset)
			}
		case 429:
			if a.detail() != detailRateLimited {
				t.Errorf("429 detail %q, want %q", a.detail(), detailRateLimited)
			}
			ra := retryAfter(t, a)
			if ra < 1 || ra > 60 {
				t.Errorf("Retry-After %d, want 1..60", ra)
			}
			// Refused because the window is full: nothing left, and the
			// slot frees when the oldest admission leaves, which is also
			// when the RateLimit header says the window next grows.
			if left != 0 || int64(reset) != ra {
				t.Errorf("429: RateLimit r=%d t=%d with Retry-After %d, want r=0 and t = Retry-After", left, reset, ra)
			}
			maxRetry = max(maxRetry, ra)
		}
	}
	for r := range 30 {
		if !leftSeen[r] {
			t.Errorf("no admitted request saw r=%d left (seen %v): the replicas do not share one window", r, leftSeen)
		}
	}
	// Quota counting is exact too: the admitted ones were numbered 1..30.
	seen := map[int64]bool{}
	for _, u := range used {
		seen[u] = true
	}
	for i := int64(1); i <= 30; i++ {
		if !seen[i] {
			t.Errorf("used_this_month values %v lack %d", used, i)
		}
	}

	// The window stays full until the oldest admission leaves it (up to a
	// minute; not waited for here): every further request on either
	// replica is refused, and Retry-After counts down towards that moment
	// (never up) and never exceeds what the burst was told.
	prev := maxRetry
	for i := range 10 {
		a := fetch(c, bases[i%2]+"/usage", key)
		if a.err != nil {
			t.Fatal(a.err)
		}
		if a.status != 429 || a.detail() != detailRateLimited {
			t.Fatalf("request %d after the burst: %d %q, want 429 %q", 101+i, a.status, a.detail(), detailRateLimited)
		}
		checkRateLimitHeaders(t, a, policy)
		ra := retryAfter(t, a)
		if ra > prev {
			t.Errorf("request %d: Retry-After %d grew from %d: the blocking admission does not move", 101+i, ra, prev)
		}
		prev = ra
	}
}

// The monthly quota is exact across replicas: 200 requests at once over
// two processes admit exactly 50, and Postgres holds exactly 50.
func TestLimitsQuotaExactAcrossInstances(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	mustRun(t, env, "migrate")
	id, key := newClient(t, env, "--tier", "business", "--monthly-quota", "50", "--rate-limit", "100000")
	bases := twoAPIs(t, env)
	c := httpClient(t)

	before := time.Now()
	answers := burst(t, c, bases, "/usage", key, 200)
	after := time.Now()
	if n := tally(answers); n[200] != 50 || n[429] != 150 || len(n) != 2 {
		t.Fatalf("200 requests at once: %v, want exactly 50 × 200 and 150 × 429", n)
	}
	// Retry-After of a quota refusal is the time until the next UTC month,
	// taken between the first request and the last answer.
	longest := int64(domain.NextMonth(before).Sub(before)/time.Second) + 1
	shortest := int64(domain.NextMonth(after).Sub(after) / time.Second)
	used := map[int64]bool{}
	for _, a := range answers {
		checkRateLimitHeaders(t, a, `"minute";q=100000;w=60, "month";q=50;w=2592000`)
		switch a.status {
		case 200:
			used[int64(a.body["used_this_month"].(float64))] = true
		case 429:
			if a.detail() != detailQuota {
				t.Errorf("429 detail %q, want %q", a.detail(), detailQuota)
			}
			if ra := retryAfter(t, a); ra < shortest || ra > longest {
				t.Errorf("quota Retry-After %d, want the seconds until the next UTC month (%d..%d)", ra, shortest, longest)
			}
		}
	}
	if len(used) != 50 {
		t.Errorf("admitted requests saw %d distinct used_this_month values, want 1..50", len(used))
	}
	if got := usedThisMonth(t, env, id); got != 50 {
		t.Errorf("clients show: used_this_month %d, want 50", got)
	}
}

// A client whose quota binds before its rate limit, hammered from outside
// in order: exactly the first 50 succeed, then only quota refusals.
func TestLimitsQuotaThenOnlyQuotaRefusals(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	mustRun(t, env, "migrate")
	id, key := newClient(t, env, "--tier", "business", "--rate-limit", "1000", "--monthly-quota", "50")
	bases := twoAPIs(t, env)
	c := httpClient(t)
	for i := 1; i <= 120; i++ {
		a := fetch(c, bases[i%2]+"/usage", key)
		if a.err != nil {
			t.Fatal(a.err)
		}
		switch {
		case i <= 50 && (a.status != 200 || a.body["used_this_month"] != float64(i)):
			t.Fatalf("request %d: %d %v, want 200 with used_this_month %d", i, a.status, a.body, i)
		case i > 50 && (a.status != 429 || a.detail() != detailQuota):
			t.Fatalf("request %d: %d %q, want 429 %q", i, a.status, a.detail(), detailQuota)
		}
	}
	if got := usedThisMonth(t, env, id); got != 50 {
		t.Errorf("clients show: used_this_month %d, want 50", got)
	}
}

// Redis holds only rate-limit windows and invalidations: losing all of it
// loses no admitted request, and the limiter carries on.
func TestLimitsQuotaSurvivesRedisFlush(t *testing.T) {
	t.Parallel()
	rdb := redistest.IsolatedDB(t)
	env := testEnv(t)
	env["MARKET_REDIS_URL"] = fmt.Sprintf("redis://%s/%d", rdb.Options().Addr, redistest.IsolatedDBNumber)
	mustRun(t, env, "migrate")
	id, key := newClient(t, env, "--tier", "business", "--rate-limit", "10")
	bases := twoAPIs(t, env)
	c := httpClient(t)

	const n = 6
	for i := 1; i <= n; i++ {
		if a := fetch(c, bases[i%2]+"/usage", key); a.err != nil || a.status != 200 {
			t.Fatalf("request %d: %d %v", i, a.status, a.err)
		}
	}
	// Every key marketd keeps lives in this one database, which no other
	// test touches: FLUSHDB here is the FLUSHALL of our data.
	if err := rdb.FlushDB(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	a := fetch(c, bases[0]+"/usage", key)
	if a.err != nil || a.status != 200 || a.body["used_this_month"] != float64(n+1) {
		t.Fatalf("after FLUSHDB: %d %v %v, want 200 with used_this_month %d", a.status, a.body, a.err, n+1)
	}
	// The flush emptied the window (one request in it now): 9 more fit, on
	// both replicas together, and the rest are refused.
	answers := burst(t, c, bases, "/usage", key, 20)
	if got := tally(answers); got[200] != 9 || got[429] != 11 {
		t.Fatalf("20 requests after the flush: %v, want 9 × 200 and 11 × 429 (rate limit 10)", got)
	}
	for _, a := range answers {
		if a.status == 429 && a.detail() != detailRateLimited {
			t.Errorf("429 detail %q, want %q", a.detail(), detailRateLimited)
		}
	}
	if got := usedThisMonth(t, env, id); got != n+1+9 {
		t.Errorf("clients show: used_this_month %d, want %d", got, n+1+9)
	}
}

// both asks both replicas and answers a status only when they agree on it
// (0 otherwise), so eventually(both) polls until every replica agrees.
func both(t *testing.T, bases []string, key string, ok func(response) bool) func() response {
	return func() response {
		var rs []response
		for _, b := range bases {
			rs = append(rs, get(t, b+"/usage", key))
		}
		for _, r := range rs {
			if r.status != rs[0].status || ok != nil && !ok(r) {
				return response{status: 0, body: map[string]any{"replicas": fmt.Sprint(rs)}}
			}
		}
		return rs[0]
	}
}

// A revoked key and a suspended client are refused by every replica
// within a second (pub/sub; the cache TTL is 2 s), though both replicas
// had the key cached.
func TestLimitsRevocationReachesBothInstances(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	mustRun(t, env, "migrate")
	id, key := newClient(t, env, "--tier", "business", "--rate-limit", "100000")
	otherKey := mustRun(t, env, "keys", "issue", "--client", id)
	bases := twoAPIs(t, env)
	for _, k := range []string{key, otherKey} {
		if r := both(t, bases, k, nil)(); r.status != 200 {
			t.Fatalf("warming the key caches: %v", r)
		}
	}

	var listed []struct {
		ID     string `json:"id"`
		Prefix string `json:"prefix"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, env, "keys", "list", "--client", id, "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	revoked := 0
	for _, k := range listed {
		if strings.HasPrefix(key, k.Prefix) {
			mustRun(t, env, "keys", "revoke", k.ID)
			revoked++
		}
	}
	if revoked != 1 {
		t.Fatalf("revoked %d keys, want 1 (%v)", revoked, listed)
	}
	r := eventually(t, both(t, bases, key, nil), 401)
	assertProblem(t, "revoked on both replicas", r, 401, "revoked")
	if r := both(t, bases, otherKey, nil)(); r.status != 200 {
		t.Fatalf("the client's other key after the revocation: %v", r)
	}

	mustRun(t, env, "clients", "suspend", id)
	r = eventually(t, both(t, bases, otherKey, nil), 403)
	assertProblem(t, "suspended on both replicas", r, 403, "suspended")
	mustRun(t, env, "clients", "activate", id)
	if r := eventually(t, both(t, bases, otherKey, nil), 200); r.status != 200 {
		t.Fatalf("after activate: %v", r)
	}
}

// A tier change applies to the next request on every replica.
func TestLimitsTierUpgradeOnNextRequest(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	mustRun(t, env, "migrate")
	id, key := newClient(t, env, "--tier", "starter", "--markets", "crypto")
	bases := twoAPIs(t, env)
	r := both(t, bases, key, nil)()
	if r.status != 200 || r.body["tier"] != "starter" || r.body["rate_limit"] != "30/minute" {
		t.Fatalf("before the upgrade: %d %v", r.status, r.body)
	}

	mustRun(t, env, "clients", "set-tier", id, "--tier", "business")
	r = eventually(t, both(t, bases, key, func(r response) bool { return r.body["tier"] == "business" }), 200)
	if r.status != 200 || r.body["tier"] != "business" || r.body["rate_limit"] != "120/minute" ||
		r.body["monthly_quota"] != 150000.0 || mustJSON(r.body["allowed_markets"]) != `["crypto","forex","stocks"]` {
		t.Fatalf("after set-tier business: %d %v", r.status, r.body)
	}
	if p := r.header.Get("RateLimit-Policy"); p != `"minute";q=120;w=60, "month";q=150000;w=2592000` {
		t.Errorf("RateLimit-Policy after the upgrade: %q", p)
	}
}

// With Redis unreachable the api still serves: the rate limit falls back
// to this replica's window, the quota is Postgres's, and /readyz says
// degraded with a 200.
func TestLimitsRedisDown(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	env["MARKET_REDIS_URL"] = "redis://127.0.0.1:1/0"
	mustRun(t, env, "migrate")
	_, key := newClient(t, env, "--tier", "business", "--rate-limit", "5")
	srv := startServer(t, env, "api")
	waitReady(t, srv)
	base := "http://" + srv.HTTPAddr() + "/api/v1/public"
	c := httpClient(t)

	for i := 1; i <= 2; i++ {
		a := fetch(c, base+"/usage", key)
		if a.err != nil || a.status != 200 || a.body["used_this_month"] != float64(i) {
			t.Fatalf("usage %d with Redis down: %d %v %v", i, a.status, a.body, a.err)
		}
	}
	answers := burst(t, c, []string{base}, "/usage", key, 10)
	if got := tally(answers); got[200] != 3 || got[429] != 7 {
		t.Errorf("10 requests at once with Redis down: %v, want 3 × 200 and 7 × 429 (fallback window of 5)", got)
	}

	resp, err := http.Get("http://" + srv.OpsAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ready struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ready); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || ready.Status != "degraded" || !strings.HasPrefix(ready.Checks["redis"], "degraded") ||
		ready.Checks["postgres"] != "ok" {
		t.Errorf("/readyz with Redis down: %d %+v, want 200 degraded", resp.StatusCode, ready)
	}
}

// A flood of made-up keys with valid checksums from this address spends
// its budget of failed authentications on both replicas (they answer 429
// and stop looking keys up), while the paying client on the same address
// is never refused, and a key issued now works at once on both.
func TestLimitsUnknownKeyFloodSparesKnownKeys(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	mustRun(t, env, "migrate")
	id, paying := newClient(t, env, "--tier", "business", "--rate-limit", "100000")
	bases := twoAPIs(t, env)
	c := httpClient(t)
	for _, b := range bases {
		if a := fetch(c, b+"/usage", paying); a.err != nil || a.status != 200 {
			t.Fatalf("paying key before the flood: %d %v", a.status, a.err)
		}
	}

	const n = 120 // per replica, at once: well past the budget of 20
	statuses := make([]int, 2*n)
	var wg sync.WaitGroup
	for i := range 2 * n {
		wg.Go(func() {
			key, err := domain.NewKey()
			if err != nil {
				t.Error(err)
				return
			}
			a := fetch(c, bases[i%2]+"/usage", key)
			if a.err != nil {
				t.Error(a.err)
				return
			}
			statuses[i] = a.status
			if a.status == 429 && (a.detail() == detailRateLimited || a.header.Get("Retry-After") == "") {
				t.Errorf("throttled made-up key: %q, Retry-After %q", a.detail(), a.header.Get("Retry-After"))
			}
		})
		if i%10 == 0 {
			for _, b := range bases {
				if a := fetch(c, b+"/usage", paying); a.err != nil || a.status != 200 {
					t.Fatalf("paying key during the flood: %d %q %v", a.status, a.detail(), a.err)
				}
			}
		}
	}
	wg.Wait()
	got := map[int]int{}
	for _, s := range statuses {
		got[s]++
	}
	if got[429] < n || got[401]+got[429] != 2*n {
		t.Errorf("flood answers %v: want 401s within the budget, then 429s", got)
	}
	fresh := mustRun(t, env, "keys", "issue", "--client", id)
	for _, b := range bases {
		if a := fetch(c, b+"/usage", fresh); a.err != nil || a.status != 200 {
			t.Errorf("a key issued during the flood, from the flooding address: %d %q %v, want 200 at once", a.status, a.detail(), a.err)
		}
	}
}
