package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
	"github.com/marketscreener/market/invalidation"
	"github.com/marketscreener/market/rediskeys"
	"github.com/marketscreener/market/store"
)

// newFlagSet is the flag set of cmd, named path ("clients show"): it
// reports errors instead of exiting, and -h renders cmd's usage, its
// summary and its flags.
func newFlagSet(path string, cmd command) *flag.FlagSet {
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: marketd %s\n\n%s\n", strings.TrimSpace(path+" "+cmd.args), cmd.summary)
		fmt.Fprintln(w, "\nflags:")
		fs.PrintDefaults()
	}
	return fs
}

// helpText is the help a command printed for -h: shown on stdout, exit 0.
type helpText string

func (h helpText) Error() string { return string(h) }

// parseFlags parses flags anywhere among the arguments ("keys revoke ID
// --json" and "keys revoke --json ID" both work) and returns the positional ones.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			return nil, helpText(fs.Output().(*bytes.Buffer).String())
		} else if err != nil {
			return nil, usagef("%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// openStore loads the configuration and opens Postgres for a CLI command.
func (m *Main) openStore(ctx context.Context) (*store.DB, Config, error) {
	cfg, err := LoadConfig(m.Getenv)
	if err != nil {
		return nil, cfg, err
	}
	db, err := store.Open(ctx, cfg.DatabaseURL, store.Options{MaxConns: 2})
	if err != nil {
		return nil, cfg, err
	}
	if err := db.Ping(ctx); err != nil {
		db.Close()
		return nil, cfg, fmt.Errorf("MARKET_DATABASE_URL: %v", err)
	}
	return db, cfg, nil
}

// openStoreWaiting is openStore retried with back-off (250 ms doubling to
// 5 s) until wait has passed: Postgres may still be starting, or restarting
// after its first-start initialisation. Configuration mistakes fail at once.
func (m *Main) openStoreWaiting(ctx context.Context, wait time.Duration) (*store.DB, error) {
	deadline := time.Now().Add(wait)
	backoff := 250 * time.Millisecond
	for {
		db, _, err := m.openStore(ctx)
		if err == nil {
			return db, nil
		}
		if _, cfgErr := LoadConfig(m.Getenv); cfgErr != nil || time.Now().Add(backoff).After(deadline) {
			if wait > 0 && cfgErr == nil {
				return nil, fmt.Errorf("Postgres did not answer within %s: %w", wait, err)
			}
			return nil, err
		}
		fmt.Fprintf(m.Stderr, "waiting for Postgres (next try in %s): %s\n", backoff, oneLine(err.Error()))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (m *Main) printJSON(v any) error {
	enc := json.NewEncoder(m.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (m *Main) cmdMigrate(ctx context.Context, fs *flag.FlagSet, args []string) error {
	asJSON := fs.Bool("json", false, "print JSON")
	wait := fs.Duration("wait", 0, "keep trying to reach Postgres this long, with back-off (a container start)")
	lockTimeout := fs.Duration("lock-timeout", 3*time.Second,
		"each migration statement's lock_timeout: a migration waiting longer for a table lock is rolled back and retried")
	retries := fs.Int("lock-retries", 10, "retries of a migration after a lock timeout (back-off 1 s doubling to 30 s)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	db, err := m.openStoreWaiting(ctx, *wait)
	if err != nil {
		return err
	}
	defer db.Close()
	cfg, err := LoadConfig(m.Getenv)
	if err != nil {
		return err
	}
	opts := store.MigrateOptions{LockTimeout: *lockTimeout, LockRetries: *retries, Logger: m.logger(cfg)}
	applied, err := db.MigrateWith(ctx, opts)
	if err != nil {
		return err
	}
	schema, err := db.Schema(ctx)
	if err != nil {
		return err
	}
	cur := schema.Version
	if *asJSON {
		if applied == nil {
			applied = []int64{}
		}
		return m.printJSON(map[string]any{"applied": applied, "version": cur, "binary": schema.Binary})
	}
	if len(applied) == 0 {
		fmt.Fprintf(m.Stdout, "schema is up to date (version %d)\n", cur)
	} else {
		fmt.Fprintf(m.Stdout, "applied %d migration(s); schema at version %d\n", len(applied), cur)
	}
	if skew := schema.Skew(); skew != "" {
		fmt.Fprintln(m.Stdout, skew)
	}
	if err := m.migrateSandbox(ctx, opts); err != nil {
		return err
	}
	return nil
}

func (m *Main) cmdCatalogue(_ context.Context, fs *flag.FlagSet, args []string) error {
	asJSON := fs.Bool("json", false, "print JSON")
	region := fs.String("region", "", "region (default MARKET_REGION)")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := LoadConfig(m.Getenv)
	if err != nil {
		return err
	}
	if r := strings.ToLower(*region); r != "" {
		cfg.Region = r
	}
	if !domain.ValidRegion(cfg.Region) {
		return usagef("--region: unknown region %q (known: %s)", cfg.Region, strings.Join(domain.Regions, ", "))
	}
	// Each combination with the feed of MARKET_FEEDS serving it; the
	// unserved ones are listed too (not scheduled, nothing to read).
	type row struct {
		domain.Combination
		Served bool   `json:"served"`
		Feed   string `json:"feed,omitempty"`
	}
	var rows []row
	for _, c := range domain.Catalogue(cfg.Region) {
		feed, ok := feeds.ServedBy(cfg.Feeds, c)
		rows = append(rows, row{Combination: c, Served: ok, Feed: feed})
	}
	if *asJSON {
		return m.printJSON(rows)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MARKET\tEXCHANGE\tINSTRUMENT\tSERVED BY")
	for _, r := range rows {
		feed := r.Feed
		if !r.Served {
			feed = "- (no feed of MARKET_FEEDS)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Market, r.Exchange, r.Instrument, feed)
	}
	return tw.Flush()
}

// printServed writes the combinations served for a client's markets, one
// a line, ready to send to the client.
func printServed(w io.Writer, served []servedCombination) {
	if len(served) == 0 {
		fmt.Fprintln(w, "this deployment serves no combination of the client's markets (see marketd catalogue)")
		return
	}
	fmt.Fprintln(w, "combinations this deployment serves for the client's markets (market/exchange/instrument):")
	for _, sc := range served {
		fmt.Fprintf(w, "  %s\n", sc.String())
	}
}

// clientJSON is the operator view of a client.
type clientJSON struct {
	ID                string     `json:"id"`
	OrgName           string     `json:"org_name"`
	Tier              string     `json:"tier"`
	Status            string     `json:"status"`
	Markets           []string   `json:"markets"`
	RateLimit         string     `json:"rate_limit"`
	MonthlyQuota      *int64     `json:"monthly_quota"`
	ContractExpiresAt *time.Time `json:"contract_expires_at"`
	CreatedAt         time.Time  `json:"created_at"`
	UsedThisMonth     *int64     `json:"used_this_month,omitempty"`
	// Combinations are what this deployment serves for the client's
	// markets (clients show).
	Combinations []servedCombination `json:"combinations,omitempty"`
}

func toClientJSON(c *domain.Client, now time.Time) clientJSON {
	return clientJSON{ID: c.ID, OrgName: c.OrgName, Tier: string(c.Tier), Status: string(c.EffectiveStatus(now)),
		Markets: domain.MarketNames(c.Markets), RateLimit: domain.RateLimitText(c.RatePerMinute()),
		MonthlyQuota: c.MonthlyQuota(), ContractExpiresAt: c.ContractExpiresAt, CreatedAt: c.CreatedAt}
}

func quotaText(q *int64) string {
	if q == nil {
		return "unlimited"
	}
	return strconv.FormatInt(*q, 10)
}

func clientsCommands() []command {
	return []command{
		{name: "create", args: "--org NAME --tier TIER [--markets M,...] [--expires RFC3339] [--rate-limit N] [--monthly-quota N|unlimited]",
			summary: "create a client and print its id", run: (*Main).clientsCreate},
		{name: "list", summary: "list the clients", run: (*Main).clientsList},
		{name: "show", args: "ID", summary: "show a client, its use this month and the combinations served for its markets", run: (*Main).clientsShow},
		{name: "suspend", args: "ID", summary: "suspend a client: its keys are refused", run: clientsSetStatus(domain.StatusSuspended)},
		{name: "activate", args: "ID", summary: "activate a suspended client", run: clientsSetStatus(domain.StatusActive)},
		{name: "set-tier", args: "ID --tier TIER [--markets M,...]", summary: "change a client's tier and markets", run: (*Main).clientsSetTier},
		{name: "set-limits", args: "ID [--rate-limit N] [--monthly-quota N|unlimited] [--expires RFC3339]",
			summary: "override a client's rate limit, monthly quota or contract end (the flags given)", run: (*Main).clientsSetLimits},
	}
}

// tierFlags are the flags choosing a client's tier and markets.
type tierFlags struct{ tier, markets *string }

func addTierFlags(fs *flag.FlagSet) tierFlags {
	return tierFlags{
		tier:    fs.String("tier", "", "starter, business or enterprise"),
		markets: fs.String("markets", "", "comma-separated markets (starter: exactly one)"),
	}
}

// limitFlags are the flags of a custom contract.
type limitFlags struct {
	expires, quota *string
	rate           *int
}

func addLimitFlags(fs *flag.FlagSet) limitFlags {
	return limitFlags{
		expires: fs.String("expires", "", "contract end, RFC 3339 (empty: no end)"),
		rate:    fs.Int("rate-limit", 0, "override: requests per rolling minute"),
		quota:   fs.String("monthly-quota", "", "override: requests per month, or unlimited"),
	}
}

// isSet reports whether the command line gave the flag name.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func (m *Main) clientsCreate(ctx context.Context, fs *flag.FlagSet, args []string) error {
	asJSON := fs.Bool("json", false, "print JSON")
	org := fs.String("org", "", "organisation name")
	tf, lf := addTierFlags(fs), addLimitFlags(fs)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("clients create takes flags only, got %q", pos)
	}
	db, _, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	c, err := clientFromFlags(*org, *tf.tier, *tf.markets, *lf.expires, isSet(fs, "rate-limit"), *lf.rate, *lf.quota)
	if err != nil {
		return err
	}
	if err := db.CreateClient(ctx, c); err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(toClientJSON(c, time.Now()))
	}
	fmt.Fprintln(m.Stdout, c.ID)
	return nil
}

func (m *Main) clientsList(ctx context.Context, fs *flag.FlagSet, args []string) error {
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	db, _, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	cs, err := db.Clients(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	if *asJSON {
		out := make([]clientJSON, 0, len(cs))
		for _, c := range cs {
			out = append(out, toClientJSON(c, now))
		}
		return m.printJSON(out)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tORG\tTIER\tSTATUS\tMARKETS\tRATE\tQUOTA")
	for _, c := range cs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.ID, c.OrgName, c.Tier, c.EffectiveStatus(now),
			strings.Join(domain.MarketNames(c.Markets), ","), domain.RateLimitText(c.RatePerMinute()), quotaText(c.MonthlyQuota()))
	}
	return tw.Flush()
}

func (m *Main) clientsShow(ctx context.Context, fs *flag.FlagSet, args []string) error {
	return m.clientCommand(ctx, fs, args, false, func(db *store.DB, id string) (*domain.Client, error) {
		return db.Client(ctx, id)
	})
}

func clientsSetStatus(status domain.ClientStatus) func(*Main, context.Context, *flag.FlagSet, []string) error {
	return func(m *Main, ctx context.Context, fs *flag.FlagSet, args []string) error {
		return m.clientCommand(ctx, fs, args, true, func(db *store.DB, id string) (*domain.Client, error) {
			return db.SetClientStatus(ctx, id, status)
		})
	}
}

func (m *Main) clientsSetTier(ctx context.Context, fs *flag.FlagSet, args []string) error {
	tf := addTierFlags(fs)
	return m.clientCommand(ctx, fs, args, true, func(db *store.DB, id string) (*domain.Client, error) {
		tier, err := domain.ParseTier(*tf.tier)
		if err != nil {
			return nil, usagef("--tier: %v", err)
		}
		markets, err := marketsFor(tier, *tf.markets)
		if err != nil {
			return nil, err
		}
		return db.SetClientTier(ctx, id, tier, markets)
	})
}

// clientsSetLimits changes the limits the command line gives and keeps
// the others.
func (m *Main) clientsSetLimits(ctx context.Context, fs *flag.FlagSet, args []string) error {
	lf := addLimitFlags(fs)
	return m.clientCommand(ctx, fs, args, true, func(db *store.DB, id string) (*domain.Client, error) {
		cur, err := db.Client(ctx, id)
		if err != nil {
			return nil, err
		}
		next, err := clientFromFlags(cur.OrgName, string(cur.Tier), strings.Join(domain.MarketNames(cur.Markets), ","), *lf.expires, isSet(fs, "rate-limit"), *lf.rate, *lf.quota)
		if err != nil {
			return nil, err
		}
		if !isSet(fs, "rate-limit") {
			next.RateLimitOverride = cur.RateLimitOverride
		}
		if !isSet(fs, "monthly-quota") {
			next.QuotaOverride, next.QuotaUnlimited = cur.QuotaOverride, cur.QuotaUnlimited
		}
		if !isSet(fs, "expires") {
			next.ContractExpiresAt = cur.ContractExpiresAt
		}
		return db.SetClientLimits(ctx, id, next.RateLimitOverride, next.QuotaOverride, next.QuotaUnlimited, next.ContractExpiresAt)
	})
}

// clientCommand runs a command on the client its one argument names: op
// reads or changes the client; a change reaches every api replica at once
// (invalidateClient). Then the client is shown.
func (m *Main) clientCommand(ctx context.Context, fs *flag.FlagSet, args []string, changes bool, op func(db *store.DB, id string) (*domain.Client, error)) error {
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("usage: marketd %s ID", fs.Name())
	}
	db, cfg, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	c, err := op(db, pos[0])
	if err != nil {
		return err
	}
	if changes {
		m.invalidateClient(ctx, c.ID)
	}
	return m.showClient(ctx, db, cfg, c, *asJSON)
}

// showClient prints a client with its use this month and the combinations
// this deployment serves for its markets.
func (m *Main) showClient(ctx context.Context, db *store.DB, cfg Config, c *domain.Client, asJSON bool) error {
	now := time.Now()
	cj := toClientJSON(c, now)
	used, err := db.UsedThisMonth(ctx, c.ID, now)
	if err != nil {
		return err
	}
	cj.UsedThisMonth = &used
	cj.Combinations = cfg.servedFor(c.Markets)
	if asJSON {
		return m.printJSON(cj)
	}
	exp := "none"
	if c.ContractExpiresAt != nil {
		exp = c.ContractExpiresAt.Format(time.RFC3339)
	}
	fmt.Fprintf(m.Stdout, "id:               %s\norg:              %s\ntier:             %s\nstatus:           %s\nmarkets:          %s\nrate limit:       %s\nmonthly quota:    %s\nused this month:  %d\ncontract expires: %s\n",
		c.ID, c.OrgName, c.Tier, cj.Status, strings.Join(cj.Markets, ","), cj.RateLimit, quotaText(c.MonthlyQuota()), used, exp)
	printServed(m.Stdout, cj.Combinations)
	return nil
}

// marketsFor applies the tier rule: starter needs exactly one market;
// business and enterprise default to all three.
func marketsFor(tier domain.Tier, flagValue string) ([]domain.Market, error) {
	markets, err := domain.ParseMarkets(flagValue)
	if err != nil {
		return nil, usagef("--markets: %v", err)
	}
	if len(markets) == 0 {
		if tier == domain.Starter {
			return nil, usagef("--markets: the starter tier needs exactly one market (crypto, forex or stocks)")
		}
		markets = append([]domain.Market(nil), domain.Markets...)
	}
	if tier == domain.Starter && len(markets) != 1 {
		return nil, usagef("--markets: the starter tier covers exactly one market, got %d", len(markets))
	}
	return markets, nil
}

func clientFromFlags(org, tierText, marketsText, expires string, rateSet bool, rate int, quota string) (*domain.Client, error) {
	if strings.TrimSpace(org) == "" {
		return nil, usagef("--org: the organisation name is required")
	}
	tier, err := domain.ParseTier(tierText)
	if err != nil {
		return nil, usagef("--tier: %v", err)
	}
	markets, err := marketsFor(tier, marketsText)
	if err != nil {
		return nil, err
	}
	c := &domain.Client{OrgName: strings.TrimSpace(org), Tier: tier, Markets: markets}
	if expires != "" {
		t, err := time.Parse(time.RFC3339, expires)
		if err != nil {
			return nil, usagef("--expires: must be RFC 3339, e.g. 2027-06-30T00:00:00Z")
		}
		t = t.UTC()
		c.ContractExpiresAt = &t
	}
	if rateSet {
		if rate < 1 {
			return nil, usagef("--rate-limit: must be at least 1 request per minute")
		}
		c.RateLimitOverride = &rate
	}
	switch strings.ToLower(quota) {
	case "":
	case "unlimited":
		c.QuotaUnlimited = true
	default:
		q, err := strconv.ParseInt(quota, 10, 64)
		if err != nil || q < 1 {
			return nil, usagef("--monthly-quota: must be a positive integer or unlimited")
		}
		c.QuotaOverride = &q
	}
	return c, c.Validate()
}

func keysCommands() []command {
	return []command{
		{name: "issue", args: "--client ID [--sandbox]", summary: "issue a key and print it, once (only its SHA-256 is stored)", run: (*Main).keysIssue},
		{name: "revoke", args: "KEY_ID", summary: "revoke a key: refused from the next request on", run: (*Main).keysRevoke},
		{name: "list", args: "--client ID", summary: "list a client's keys: ids and prefixes, never keys", run: (*Main).keysList},
	}
}

// keyJSON is the operator view of an API key.
type keyJSON struct {
	ID        string     `json:"id"`
	ClientID  string     `json:"client_id"`
	Prefix    string     `json:"prefix"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
	Key       string     `json:"key,omitempty"`
	Sandbox   bool       `json:"sandbox"`
	// Combinations are what the key reads: this deployment's served
	// combinations of the client's markets (keys issue).
	Combinations []servedCombination `json:"combinations,omitempty"`
}

func toKeyJSON(k *domain.APIKey) keyJSON {
	return keyJSON{ID: k.ID, ClientID: k.ClientID, Prefix: k.Prefix, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt, Sandbox: k.Sandbox()}
}

func (m *Main) keysIssue(ctx context.Context, fs *flag.FlagSet, args []string) error {
	asJSON := fs.Bool("json", false, "print JSON")
	clientID := fs.String("client", "", "client id")
	sandbox := fs.Bool("sandbox", false, "issue a sandbox key (msk_test_…): synthetic data, no quota")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *clientID == "" || len(pos) != 0 {
		return usagef("usage: marketd keys issue --client ID [--sandbox]")
	}
	db, cfg, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	issue := db.IssueKey
	if *sandbox {
		issue = db.IssueSandboxKey
	}
	key, rec, err := issue(ctx, *clientID)
	if err != nil {
		return err
	}
	m.publish(ctx, invalidation.KeyIssued(rec.Hash))
	served, err := m.keyCombinations(ctx, db, cfg, *clientID, *sandbox)
	if err != nil {
		return err
	}
	if *asJSON {
		kj := toKeyJSON(rec)
		kj.Key, kj.Combinations = key, served
		return m.printJSON(kj)
	}
	// The key alone on stdout (scripts capture it); what it reads on
	// stderr, for the operator to send with it.
	fmt.Fprintln(m.Stdout, key)
	printServed(m.Stderr, served)
	return nil
}

func (m *Main) keysRevoke(ctx context.Context, fs *flag.FlagSet, args []string) error {
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("usage: marketd keys revoke KEY_ID")
	}
	db, _, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	k, err := db.RevokeKey(ctx, pos[0])
	if err != nil {
		return err
	}
	m.invalidateKey(ctx, k.Hash)
	if *asJSON {
		return m.printJSON(toKeyJSON(k))
	}
	fmt.Fprintf(m.Stdout, "revoked %s (%s…) at %s\n", k.ID, k.Prefix, k.RevokedAt.Format(time.RFC3339))
	return nil
}

func (m *Main) keysList(ctx context.Context, fs *flag.FlagSet, args []string) error {
	asJSON := fs.Bool("json", false, "print JSON")
	clientID := fs.String("client", "", "client id")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	if *clientID == "" {
		return usagef("usage: marketd keys list --client ID")
	}
	db, _, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	keys, err := db.Keys(ctx, *clientID)
	if err != nil {
		return err
	}
	if *asJSON {
		out := make([]keyJSON, 0, len(keys))
		for _, k := range keys {
			out = append(out, toKeyJSON(k))
		}
		return m.printJSON(out)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPREFIX\tCREATED\tREVOKED")
	for _, k := range keys {
		rev := "-"
		if k.RevokedAt != nil {
			rev = k.RevokedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s…\t%s\t%s\n", k.ID, k.Prefix, k.CreatedAt.Format(time.RFC3339), rev)
	}
	return tw.Flush()
}

// invalidateKey and invalidateClient tell every api replica, over Redis
// pub/sub, to drop cached credentials at once (and publish, after keys
// issue, that a key exists). When Redis is unreachable a change still
// reaches every replica within the key cache's TTL, and a new key works
// anyway (looked up on first use).
func (m *Main) invalidateKey(ctx context.Context, keyHash string) {
	m.publish(ctx, invalidation.KeyRevoked(keyHash))
}

func (m *Main) invalidateClient(ctx context.Context, clientID string) {
	m.publish(ctx, invalidation.ClientChanged(clientID))
}

func (m *Main) publish(ctx context.Context, inv invalidation.Message) {
	cfg, err := LoadConfig(m.Getenv)
	if err != nil {
		return
	}
	opts, err := rediskeys.ClientOptions(cfg.RedisURL)
	if err != nil {
		return
	}
	rdb := opts.NewClient()
	defer rdb.Close()
	if err := invalidation.NewBus(rdb, "", slog.New(slog.DiscardHandler)).Publish(ctx, inv); err != nil {
		fmt.Fprintf(m.Stderr, "warning: could not notify api replicas over Redis (%v); they apply the change within %s\n", err, admission.DefaultKeyTTL)
	}
}

func webhooksCommands() []command {
	return []command{
		{name: "list", args: "[--client ID]", summary: "list subscriptions: status and failures, never secrets", run: (*Main).webhooksList},
		{name: "enable", args: "ID", summary: "re-enable a subscription disabled after repeated failures", run: (*Main).webhooksEnable},
	}
}

// hookJSON is the operator view of a webhook subscription.
type hookJSON struct {
	ID                  string     `json:"id"`
	ClientID            string     `json:"client_id"`
	CallbackURL         string     `json:"callback_url"`
	Market              *string    `json:"market"`
	Status              string     `json:"status"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	LastDeliveryAt      *time.Time `json:"last_delivery_at"`
	LastSuccessAt       *time.Time `json:"last_success_at"`
	LastError           string     `json:"last_error,omitempty"`
	CreatedAt           time.Time  `json:"created_at"`
}

func (m *Main) webhooksList(ctx context.Context, fs *flag.FlagSet, args []string) error {
	asJSON := fs.Bool("json", false, "print JSON")
	clientID := fs.String("client", "", "only this client's subscriptions")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("usage: marketd webhooks list [--client ID]")
	}
	db, _, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	ws, err := db.Webhooks(ctx, *clientID)
	if err != nil {
		return err
	}
	out := make([]hookJSON, 0, len(ws))
	for _, w := range ws {
		h := hookJSON{ID: w.ID, ClientID: w.ClientID, CallbackURL: w.CallbackURL, Status: w.Status,
			ConsecutiveFailures: w.ConsecutiveFailures, LastDeliveryAt: w.LastDeliveryAt, LastSuccessAt: w.LastSuccessAt, CreatedAt: w.CreatedAt}
		if !w.LastError.OK() {
			h.LastError = w.LastError.String()
		}
		if w.Market != nil {
			s := string(*w.Market)
			h.Market = &s
		}
		out = append(out, h)
	}
	if *asJSON {
		return m.printJSON(out)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCLIENT\tMARKET\tSTATUS\tFAILURES\tURL")
	for _, h := range out {
		market := "all"
		if h.Market != nil {
			market = *h.Market
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", h.ID, h.ClientID, market, h.Status, h.ConsecutiveFailures, h.CallbackURL)
	}
	return tw.Flush()
}

func (m *Main) webhooksEnable(ctx context.Context, fs *flag.FlagSet, args []string) error {
	fs.Bool("json", false, "accepted for uniformity; enable prints one line")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("usage: marketd webhooks enable ID")
	}
	db, _, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.EnableWebhook(ctx, "", pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "enabled %s\n", pos[0])
	return nil
}

// migrateSandbox applies the migrations to the sandbox's database too
// (MARKET_SANDBOX_DATABASE_URL), creating its schema when it is missing.
func (m *Main) migrateSandbox(ctx context.Context, opts store.MigrateOptions) error {
	cfg, err := LoadConfig(m.Getenv)
	if err != nil || cfg.SandboxDatabaseURL == "" {
		return err
	}
	db, err := store.Open(ctx, cfg.SandboxDatabaseURL, store.Options{MaxConns: 2})
	if err != nil {
		return fmt.Errorf("MARKET_SANDBOX_DATABASE_URL: %w", err)
	}
	defer db.Close()
	if err := db.EnsureSchema(ctx); err != nil {
		return fmt.Errorf("MARKET_SANDBOX_DATABASE_URL: %w", err)
	}
	applied, err := db.MigrateWith(ctx, opts)
	if err != nil {
		return fmt.Errorf("MARKET_SANDBOX_DATABASE_URL: %w", err)
	}
	fmt.Fprintf(m.Stderr, "sandbox: applied %d migration(s)\n", len(applied))
	return nil
}

// keyCombinations is what a key of the client reads: the combinations of
// the client's markets this deployment serves; a sandbox key reads the
// synthetic feed, which serves the whole catalogue.
func (m *Main) keyCombinations(ctx context.Context, db *store.DB, cfg Config, clientID string, sandbox bool) ([]servedCombination, error) {
	c, err := db.Client(ctx, clientID)
	if err != nil {
		return nil, err
	}
	if sandbox {
		cfg.Feeds = []string{feeds.NameSynthetic}
	}
	return cfg.servedFor(c.Markets), nil
}
