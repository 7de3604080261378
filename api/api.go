// Package api is the public HTTP API (huma v2, OpenAPI 3.1) under
// /api/v1/public: key authentication, per-client limits, the operations,
// the RFC 9457 problem bodies, and the offline docs page. It only reads
// precomputed data; it never calls an exchange or computes a score.
package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/readcache"
	"github.com/marketscreener/market/stream"
	"github.com/marketscreener/market/webhook"
)

// BasePath is the prefix of every public operation.
const BasePath = "/api/v1/public"

// Gate admits or refuses a request before its operation runs: the key,
// the client's status, the rate limit and the quota, in that order, with
// the response headers they imply (package admission).
type Gate interface {
	Admit(ctx context.Context, r admission.Request) (admission.Outcome, error)
}

// Store is what the operations read.
type Store interface {
	MarketData
	AnalyticsData
	WebhookData
	AlertData
}

// Config configures the api.
type Config struct {
	Region string
	// Served is what the deployment's feeds serve (nil: every combination
	// of the region's catalogue). A combination it does not serve is a
	// 404, and it picks each market's analytics source.
	Served domain.Served
	// DataFeed names the market-data feed serving a combination, for the
	// reports' data_quality.source.data_feed ("binance", "alpaca/iex");
	// nil or "" leaves it out.
	DataFeed func(domain.Combination) string
	Version  string
	Logger   *slog.Logger
	Now      func() time.Time
	// Ready reports whether public requests may be served (see Readiness).
	Ready func() bool
	// SecretBox seals webhook secrets (MARKET_SECRET_KEY); nil refuses
	// new subscriptions with 503.
	SecretBox *domain.SecretBox
	// WebhookAllowPrivate accepts loopback and private callback addresses
	// (tests only).
	WebhookAllowPrivate bool
	// WebhookClient sends test pings (POST /webhooks/{id}/test): the
	// worker's hardened delivery client (nil: one built from
	// WebhookAllowPrivate, trusting the system roots).
	WebhookClient *http.Client
	// WebhookPingFloor is the earliest a test ping that reached no TLS
	// server answers, from its start (webhook.Timeout when 0): a closed
	// port fails at once and a filtered one at the dial's time-out, so
	// the answer's timing would tell them apart as its body does not.
	WebhookPingFloor time.Duration
	// Cache holds hot reads; share it with the invalidation bus so writes
	// drop it (a private one with readcache.DefaultTTL when nil).
	Cache *readcache.Cache
	// Stream is this replica's event hub and StreamData what streams read
	// (replays, screener rows); without them GET /stream is 503.
	// StreamSlots caps concurrent streams per client (no cap when nil).
	Stream      *stream.Hub
	StreamData  StreamData
	StreamSlots *stream.Slots
	// StreamHeartbeat and StreamRecheck are the heartbeat period and how
	// often a stream rechecks its key (DefaultStreamHeartbeat and
	// DefaultStreamRecheck when 0).
	StreamHeartbeat time.Duration
	StreamRecheck   time.Duration
	// StreamReplays is how many replay pages of resumed streams run at
	// once (DefaultStreamReplays when 0), at most half of them (at least
	// one) for one client's streams. StreamData should be a pool of
	// its own with one connection more, kept for the hub.
	StreamReplays int
	// Sandbox makes this the sandbox keys' server (see SandboxRouter): it
	// serves sandbox keys only, and the store it is given holds the
	// sandbox's data. SandboxPusher stores POST /sandbox/verdict-change.
	Sandbox       bool
	SandboxPusher SandboxPusher
	// RequestTimeout is each request's time budget (DefaultRequestTimeout
	// when 0; negative: none), which a route may lengthen (routes.go).
	RequestTimeout time.Duration
	// Refresh is the worker's schedule, for the Cache-Control max-age of
	// data (zero fields: the defaults).
	Refresh RefreshIntervals
	// Hours are the markets' calendars (calendar.Book, read from
	// Postgres): a closed market's data is served without a 502 and the
	// answers say the market is closed. Nil: every market trades around
	// the clock.
	Hours domain.MarketHours
}

// Server is the public API.
type Server struct {
	cfg       Config
	gate      Gate
	humaAPI   huma.API
	mux       *http.ServeMux
	handler   http.Handler
	metrics   *metrics
	data      MarketData
	analytics AnalyticsData
	webhooks  WebhookData
	alerts    AlertData
	cache     *readcache.Cache
	usage     *usageBodies
	// hotDecoded counts the requests a hot route's decoder took; noHot
	// leaves every request to huma's decoding (the tests compare both).
	hotDecoded atomic.Int64
	noHot      bool
	// realClock: cfg.Now is time.Now (not a test's clock), so a request's
	// arrival time serves as its clock reading everywhere (Server.now).
	realClock bool
	// cacheControls formats the data responses' Cache-Control values,
	// marketHeaders their X-Market-* values.
	cacheControls cacheControls
	marketHeaders marketHeaderCache
	// webhookClient sends test pings.
	webhookClient *http.Client
	// replays holds a token per replay page running (Config.StreamReplays),
	// a share of them per client.
	replays *replayPool
	// methodology is the body of GET /analytics/methodology, encoded once:
	// it changes only with the binary (methodologyErr when it cannot be built).
	methodology    readcache.Body
	methodologyErr error
	// screens are the markets' snapshots POST /screener/query evaluates
	// over, programs its compiled expressions.
	screens  screenSnapshots
	programs screenPrograms
	// pages are the answers of POST /screener/query, per snapshot.
	pages screenPages
}

// New builds the api with every operation registered.
func New(cfg Config, store Store, gate Gate) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	realClock := cfg.Now == nil
	if realClock {
		cfg.Now = time.Now
	}
	if cfg.Ready == nil {
		cfg.Ready = func() bool { return true }
	}
	if cfg.Version == "" {
		cfg.Version = "1.0.0"
	}
	cfg.Refresh = cfg.Refresh.withDefaults()
	if cfg.StreamHeartbeat <= 0 {
		cfg.StreamHeartbeat = DefaultStreamHeartbeat
	}
	if cfg.StreamRecheck <= 0 {
		cfg.StreamRecheck = DefaultStreamRecheck
	}
	if cfg.WebhookPingFloor <= 0 {
		cfg.WebhookPingFloor = webhook.Timeout
	}
	if cfg.StreamReplays <= 0 {
		cfg.StreamReplays = DefaultStreamReplays
	}
	if cfg.Cache == nil {
		cfg.Cache = readcache.New(readcache.DefaultTTL, cfg.Now)
	}
	s := &Server{replays: newReplayPool(cfg.StreamReplays), cfg: cfg, data: store, analytics: store, webhooks: store, alerts: store, gate: gate, mux: http.NewServeMux(),
		metrics: newMetrics(), cache: cfg.Cache, usage: newUsageBodies(), webhookClient: cfg.WebhookClient,
		realClock: realClock}
	s.methodology, s.methodologyErr = methodologyBody()
	if s.webhookClient == nil {
		s.webhookClient = webhook.NewClient(webhook.ClientConfig{AllowPrivate: cfg.WebhookAllowPrivate})
	}

	hc := huma.DefaultConfig("Market Screener and Analytics API", cfg.Version)
	hc.OpenAPIPath = ""
	hc.DocsPath = ""
	hc.SchemasPath = ""
	// No "$schema" links in bodies: the schemas live in /openapi.json.
	hc.CreateHooks = nil
	hc.Servers = []*huma.Server{{URL: BasePath, Description: "this deployment (region " + cfg.Region + ")"}}
	hc.Info.Description = apiDescription
	hc.Info.Contact = &huma.Contact{Name: "API support: the contact named in your organisation's contract"}
	hc.Info.License = &huma.License{Name: "Proprietary: used under your organisation's contract", Identifier: "LicenseRef-Proprietary"}
	hc.Tags = apiTags
	hc.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		securityScheme: {Type: "apiKey", In: "header", Name: "X-API-Key",
			Description: "The key issued to your organisation. Keep it in server-side code only."},
	}
	hc.Security = []map[string][]string{{securityScheme: {}}}
	s.humaAPI = huma.NewAPI(hc, routeAdapter{s})
	registerDomainEnums(s.humaAPI.OpenAPI().Components.Schemas)
	s.registerUsage()
	s.registerMarketData()
	s.registerAnalytics()
	s.registerScreenerQuery()
	s.registerMethodology()
	s.registerBatch()
	s.documentMarketHeaders()
	s.registerWebhooks()
	s.registerAlerts()
	s.documentWebhookPayloads()
	s.registerStream()
	s.registerSandbox()
	s.documentProblems()

	s.mux.HandleFunc("GET /openapi.json", s.serveOpenAPI)
	s.mux.HandleFunc("GET /openapi-3.0.json", s.serveOpenAPI30)
	s.mux.Handle("GET /docs", http.RedirectHandler("/docs/", http.StatusMovedPermanently))
	s.mux.Handle("GET /docs/", docsHandler())
	s.mux.HandleFunc("/", s.notFound)
	s.handler = s.requestMiddleware(s.mux)
	return s
}

const securityScheme = "apiKey"

// apiTags group the operations in the docs page and generated clients, in
// this order; every operation's tag is one of them.
var apiTags = []*huma.Tag{
	{Name: tagAccount, Description: "Your organisation's tier, limits and usage."},
	{Name: tagMarketData, Description: "Live screener rows and OHLCV candles, per market, exchange and instrument."},
	{Name: tagAnalytics, Description: "Technical and fundamental scores, verdicts with their factors, history and statistics."},
	{Name: tagEvents, Description: "The resumable Server-Sent Events stream of verdict changes and screener refreshes."},
	{Name: tagWebhooks, Description: "Signed webhooks on verdict changes: subscriptions, deliveries, secrets."},
	{Name: tagAlerts, Description: "Conditions you define over every precomputed field, evaluated after each rescoring, delivered by webhook and on the event stream."},
	{Name: tagSandbox, Description: "Test events on sandbox keys."},
}

const (
	tagAccount    = "Account"
	tagMarketData = "Market data"
	tagAnalytics  = "Analytics"
	tagEvents     = "Events"
	tagWebhooks   = "Webhooks"
	tagSandbox    = "Sandbox"
	tagAlerts     = "Alerts"
)

// Handler returns the http.Handler of the public listener.
func (s *Server) Handler() http.Handler { return s.handler }

// OpenAPI returns the OpenAPI 3.1 document.
func (s *Server) OpenAPI() *huma.OpenAPI { return s.humaAPI.OpenAPI() }

// OpenAPI30 is the document downgraded to OpenAPI 3.0.3, without the
// webhooks (a 3.1 object; their payloads' schemas stay in components).
func (s *Server) OpenAPI30() ([]byte, error) {
	doc := *s.humaAPI.OpenAPI()
	doc.Webhooks = nil
	return doc.Downgrade()
}

// Metrics returns the Prometheus registry of the api, for the ops listener.
func (s *Server) Metrics() http.Handler { return s.metrics.handler() }

func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	b, err := json.Marshal(s.humaAPI.OpenAPI())
	if err != nil {
		http.Error(w, "openapi: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/vnd.oai.openapi+json;version=3.1")
	_, _ = w.Write(b)
}

// serveOpenAPI30 serves the document downgraded to OpenAPI 3.0.3, for
// generators that read no 3.1 (package client is generated from it).
func (s *Server) serveOpenAPI30(w http.ResponseWriter, r *http.Request) {
	b, err := s.OpenAPI30()
	if err != nil {
		http.Error(w, "openapi: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/vnd.oai.openapi+json;version=3.0")
	_, _ = w.Write(b)
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, newProblem(http.StatusNotFound, "no operation at "+r.Method+" "+r.URL.Path+"; see /docs"))
}

func writeProblem(w http.ResponseWriter, p huma.StatusError) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.GetStatus())
	_ = json.NewEncoder(w).Encode(p)
}

// errorResponses documents the problems every authenticated operation can return.
func errorResponses(extra ...int) []int {
	return append([]int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden,
		http.StatusTooManyRequests, http.StatusServiceUnavailable}, extra...)
}
