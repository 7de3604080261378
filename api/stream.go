package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/stream"
	"github.com/marketscreener/market/webhook"
)

// StreamData is what the event stream reads besides the hub: the log, for
// replays, and the screener rows an event carries.
type StreamData interface {
	ReplayStreamEvents(ctx context.Context, f store.StreamFilter, after, upTo domain.StreamPos, limit int) ([]domain.StreamEvent, error)
	StreamPosOf(ctx context.Context, id int64) (domain.StreamPos, bool, error)
	Tickers(ctx context.Context, c domain.Combination) ([]domain.Ticker, error)
}

// KeyRechecker is a gate that can tell whether an admitted key may still
// be served (admission.Gate): streams ask it for their whole life.
type KeyRechecker interface {
	Recheck(ctx context.Context, keyHash string) (admission.Outcome, error)
}

// Stream defaults (Config.Stream*).
const (
	DefaultStreamHeartbeat = 15 * time.Second
	DefaultStreamRecheck   = 250 * time.Millisecond
	DefaultStreamReplays   = 3
	streamReplayPage       = 500
	streamWriteTimeout     = 10 * time.Second
)

// StreamQueryTimeout bounds the database work of one replay page (its
// query and the screener rows it renders); the stream pool's statements
// get it as their statement_timeout too.
const StreamQueryTimeout = 2 * time.Second

// StreamVerdictChanged is the data of a verdict_changed event: the webhook
// delivery's body, plus sandbox on the events of a sandbox push.
type StreamVerdictChanged struct {
	ID           string             `json:"id" doc:"The verdict event's id: the same as the webhook delivery's id (webhook-id), so a client taking both can de-duplicate. On a sandbox key's stream, the synthetic feed's own events (never sent as webhooks) carry sbx_<number>, apart from the pushes' ids" example:"4211"`
	Event        verdictChangedName `json:"event" example:"verdict_changed"`
	Market       domain.Market      `json:"market" example:"crypto"`
	Symbol       string             `json:"symbol" example:"BTC_USDT"`
	OldVerdict   analytics.Verdict  `json:"old_verdict" example:"neutral"`
	NewVerdict   analytics.Verdict  `json:"new_verdict" example:"growth"`
	OverallScore int                `json:"overall_score" minimum:"-100" maximum:"100" example:"34"`
	Timestamp    string             `json:"timestamp" doc:"When the verdict changed (RFC 3339 UTC)" example:"2026-11-22T10:15:00Z"`
	ModelVersion string             `json:"model_version" doc:"Version of the scoring method that made the new verdict (GET /analytics/methodology)" example:"v1"`
	Sandbox      bool               `json:"sandbox,omitempty" doc:"true on an event pushed with POST /sandbox/verdict-change (absent otherwise)" example:"false"`
}

// StreamScreener is the data of a screener event: the combination's rows
// as stored when the event is read.
type StreamScreener struct {
	Event      screenerEventName `json:"event" example:"screener"`
	Market     domain.Market     `json:"market" example:"crypto"`
	Exchange   string            `json:"exchange" example:"binance"`
	Instrument string            `json:"instrument" example:"spot"`
	Rows       []ScreenerRecord  `json:"rows" doc:"Every row of the combination, as GET /screener/{market_type}/{exchange}/{instrument} answers"`
}

// StreamClosed is the data of the last event of a stream the service ends:
// the key was revoked (401), the client suspended or past its contract, or
// its tier no longer covers a requested market (403), or the stream lost
// its place under the client's stream cap (429).
type StreamClosed struct {
	Status int    `json:"status" enum:"401,403,429" example:"401"`
	Detail string `json:"detail" example:"invalid API key: the key has been revoked"`
}

// StreamResync is the data of the event a resumed stream sends instead of
// a replay when the stream no longer holds the client's Last-Event-ID
// (older than the log's retention, or never one of its ids). Live events
// follow it.
type StreamResync struct {
	LastEventID string `json:"last_event_id" doc:"The Last-Event-ID the stream could not resume from" example:"18234"`
	Detail      string `json:"detail" example:"event 18234 is no longer held (events are kept at least 24 hours): reload the current state from the REST endpoints (screener, reports); live events follow"`
}

type streamInput struct {
	Market      string `query:"market" maxLength:"64" doc:"Comma-separated markets (crypto, forex, stocks); omitted means every market of your tier" example:"crypto"`
	Events      string `query:"events" maxLength:"64" doc:"Comma-separated event kinds: verdict_changed, screener, alert (your alerts' firings); omitted means all three" example:"verdict_changed,screener"`
	LastEventID string `header:"Last-Event-ID" maxLength:"20" doc:"The id of the last event you received: the stream first sends every event after it (kept at least 24 hours), then live events. Browsers' EventSource sends it by itself when it reconnects" example:"18234"`
	LastEventQ  string `query:"last_event_id" maxLength:"20" doc:"Same as the Last-Event-ID header, for clients that cannot set headers; the header wins" example:"18234"`
}

// Unwrap lets http.ResponseController reach the connection (flushes and
// write deadlines of streams).
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (s *Server) registerStream() {
	events := map[string]any{
		domain.EventVerdictChanged: StreamVerdictChanged{},
		domain.EventScreener:       StreamScreener{},
		domain.EventAlert:          webhook.AlertTriggered{},
		"closed":                   StreamClosed{},
		"resync":                   StreamResync{},
	}
	var schemas []*huma.Schema
	for _, name := range []string{domain.EventVerdictChanged, domain.EventScreener, domain.EventAlert, "closed", "resync"} {
		schemas = append(schemas, &huma.Schema{Title: "Event " + name, Type: huma.TypeObject,
			Properties: map[string]*huma.Schema{
				"id":    {Type: huma.TypeInteger, Description: "The event's id (absent on closed and resync), opaque and not monotonic: send the last one received back as Last-Event-ID"},
				"event": {Type: huma.TypeString, Description: "The event name", Extensions: map[string]any{"const": name}},
				"data":  s.humaAPI.OpenAPI().Components.Schemas.Schema(reflect.TypeOf(events[name]), true, name),
			},
			Required: []string{"event", "data"}})
	}
	example := "retry: 2000\n\n" +
		"id: 18235\nevent: verdict_changed\n" +
		`data: {"id":"4211","event":"verdict_changed","market":"crypto","symbol":"BTC_USDT","old_verdict":"neutral","new_verdict":"growth","overall_score":34,"timestamp":"2026-11-22T10:15:00Z","model_version":"v1"}` + "\n\n" +
		": heartbeat\n\n" +
		"id: 18236\nevent: screener\n" +
		`data: {"event":"screener","market":"crypto","exchange":"binance","instrument":"spot","rows":[{"symbol":"BTC_USDT","price":97250.5,"change_pct":-1.85,"volume":1843000000,"updated_at":"2026-11-22T10:15:10Z"}]}` + "\n\n"
	register(s, huma.Operation{
		OperationID: "get-stream",
		Summary:     "Event stream (Server-Sent Events): verdict changes and screener refreshes, resumable",
		Description: "A `text/event-stream` of `verdict_changed` events (the webhook payload) and `screener` events " +
			"(the rows of a combination, after each refresh), for the markets and kinds you ask for. Every event has an " +
			"`id`; reconnect with `Last-Event-ID` (or `last_event_id`) and you first get every event after it that you " +
			"missed (kept at least 24 hours; of the screener events, the newest per combination, each being a full " +
			"snapshot), then live events: nothing lost, nothing twice. An id the stream no longer holds (older than the " +
			"retention, or not one of its ids) is not replayed: the stream sends one `resync` event (no `id`) telling you " +
			"to reload the current state from the REST endpoints, then live events. A comment line (`: heartbeat`) every " +
			"15 s keeps proxies from closing the connection.\n\n" +
			"Opening a stream is one request against the rate limit and the quota; it then lasts as long as you keep " +
			"it. At most 2 (starter), 10 (business) or 50 (enterprise) streams per client are open at once, over all " +
			"keys and servers: one more is 429. Your key, status and tier are checked for the life of the stream: a " +
			"revoked key's stream ends within a second, with a last `closed` event saying why (401 or 403), whatever the " +
			"stream is doing (replaying, idle, or waiting on a client that does not read: that one has 250 ms to take the " +
			"event, then its connection is closed). If the service loses its count of open streams (a Redis failure), the streams are " +
			"counted again in the order they re-register, and one that finds the cap full ends with `closed` (429).\n\n" +
			"A sandbox key's stream carries the sandbox's synthetic events (the same kinds and shapes) and the " +
			"`verdict_changed` events its own client pushed with `POST /sandbox/verdict-change` (marked " +
			"`\"sandbox\": true`), under one id space: resuming works across both. It never carries live events, " +
			"nor another client's pushes.\n\n" +
			"`alert` events are your own alerts' firings (POST /alerts): the data is the `alert.triggered` webhook body, with the same `id`.",
		Tags: []string{tagEvents},
		Responses: map[string]*huma.Response{"200": {
			Description: "The stream, until you close it or the service ends it. Example:\n\n```\n" + example + "```",
			Content: map[string]*huma.MediaType{"text/event-stream": {
				Schema: &huma.Schema{Title: "Server-Sent Events", Type: huma.TypeArray,
					Items: &huma.Schema{Extensions: map[string]any{"oneOf": schemas}}},
				// The wire text is in the description: an example here
				// must be the array the schema describes.
			}},
		}},
		Errors: errorResponses(http.StatusServiceUnavailable),
	}, s.getStream)
}

// streamRequest is what getStream checked, for the connection's life.
type streamRequest struct {
	filter  store.StreamFilter
	last    int64 // Last-Event-ID; -1 when none
	keyHash string
	client  *domain.Client
}

func (s *Server) getStream(ctx context.Context, in *streamInput) (*huma.StreamResponse, error) {
	p := principalFrom(ctx)
	req, err := s.checkStream(ctx, p, in)
	if err != nil {
		return nil, err
	}
	if s.cfg.Stream == nil || s.cfg.StreamData == nil {
		return nil, huma.Error503ServiceUnavailable("the event stream is not available on this server")
	}
	var slot *stream.Slot // nil: no cap
	if s.cfg.StreamSlots != nil {
		var ok bool
		if slot, ok = s.cfg.StreamSlots.Acquire(ctx, p.Client.ID, p.Client.Tier.MaxStreams()); !ok {
			return nil, huma.ErrorWithHeaders(huma.NewError(http.StatusTooManyRequests, streamCapDetail(p.Client.Tier)+"; close one first"),
				http.Header{"Retry-After": {"5"}})
		}
	}
	match := func(e domain.StreamEvent) bool {
		// A push is its client's only (a live stream has no client here:
		// "" takes none, and the service's log holds none anyway).
		// An alert event is its client's only.
		return (e.SandboxClientID == "" || e.SandboxClientID == req.filter.SandboxClientID) && (e.ClientID == "" || e.ClientID == req.filter.ClientID) &&
			slices.Contains(req.filter.Kinds, e.Kind) && slices.Contains(req.filter.Markets, e.Market)
	}
	sub, err := s.cfg.Stream.Subscribe(ctx, match)
	if err != nil {
		slot.Release()
		return nil, huma.Error503ServiceUnavailable("the event stream is not available right now; retry shortly")
	}
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		defer slot.Release()
		defer sub.Close()
		s.serveStream(hctx, req, sub, slot)
	}}, nil
}

// streamCapDetail says the client's stream cap (429 at open, and the
// closing event of a stream that lost its slot).
func streamCapDetail(t domain.Tier) string {
	return fmt.Sprintf("at most %d event streams may be open at once on the %s tier", t.MaxStreams(), t)
}

// checkStream validates the parameters (400), then the markets (403).
func (s *Server) checkStream(ctx context.Context, p *principal, in *streamInput) (streamRequest, error) {
	req := streamRequest{last: -1, keyHash: p.Key.Hash, client: p.Client}
	kinds, err := domain.ParseStreamEventKinds(in.Events)
	if err != nil {
		return req, s.problem(ctx, err)
	}
	markets := slices.Clone(p.Client.Markets)
	if strings.TrimSpace(in.Market) != "" {
		markets, err = domain.ParseMarkets(in.Market)
		if err != nil {
			var de *domain.Error
			msg := err.Error()
			if errors.As(err, &de) {
				msg = de.Message
			}
			return req, s.problem(ctx, domain.Invalid("query.market", in.Market, "%s", msg))
		}
		if len(markets) == 0 {
			return req, s.problem(ctx, domain.Invalid("query.market", in.Market, "name at least one market (crypto, forex, stocks)"))
		}
	}
	loc, raw := "header.Last-Event-ID", in.LastEventID
	if raw == "" {
		loc, raw = "query.last_event_id", in.LastEventQ
	}
	if raw != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
		if err != nil || n < 0 {
			return req, s.problem(ctx, domain.Invalid(loc, raw, "must be the id of an event of this stream (a non-negative integer)"))
		}
		req.last = n
	}
	for _, m := range markets {
		if err := requireMarket(ctx, m); err != nil {
			return req, err
		}
	}
	req.filter = store.StreamFilter{Markets: markets, Kinds: kinds, ClientID: p.Client.ID}
	if p.Key.Sandbox() {
		// The sandbox server's log (the sandbox's schema): its synthetic
		// events and this client's pushes.
		req.filter.SandboxClientID = p.Client.ID
	}
	return req, nil
}

// sseWriter writes the stream, each write under a deadline of its own
// (the server's WriteTimeout would otherwise cut every stream after a
// minute), flushed at once. A stream's guard may end the writes from
// another goroutine (cut).
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf []byte

	mu  sync.Mutex
	cut time.Time // set: the stream is ending, no write lasts past it
}

// errStreamEnding refuses the writes of a stream its guard is ending.
var errStreamEnding = errors.New("api: the stream is ending")

func (w *sseWriter) write(b []byte) error {
	if err := w.arm(); err != nil {
		return err
	}
	return w.send(b)
}

// arm gives the next write its deadline, or refuses it once cut.
func (w *sseWriter) arm() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.cut.IsZero() {
		return errStreamEnding
	}
	_ = w.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	return nil
}

// endBy makes every write fail at t, one blocked at this moment on a
// client that does not read included (a connection's write deadline
// applies to a pending write too), and refuses new ones. It is the one
// method safe to call beside a write.
func (w *sseWriter) endBy(t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cut = t
	_ = w.rc.SetWriteDeadline(t)
}

func (w *sseWriter) send(b []byte) error {
	if _, err := w.w.Write(b); err != nil {
		return err
	}
	return w.rc.Flush()
}

func (w *sseWriter) event(id int64, name string, data []byte) error {
	w.format(id, name, data)
	return w.write(w.buf)
}

func (w *sseWriter) format(id int64, name string, data []byte) {
	w.buf = w.buf[:0]
	if id > 0 {
		w.buf = append(w.buf, "id: "...)
		w.buf = strconv.AppendInt(w.buf, id, 10)
		w.buf = append(w.buf, '\n')
	}
	w.buf = append(w.buf, "event: "...)
	w.buf = append(w.buf, name...)
	w.buf = append(w.buf, "\ndata: "...)
	w.buf = append(w.buf, data...)
	w.buf = append(w.buf, "\n\n"...)
}

func (s *Server) serveStream(hctx huma.Context, req streamRequest, sub *stream.Subscription, slot *stream.Slot) {
	ctx, cancel := context.WithCancel(hctx.Context())
	defer cancel()
	hctx.SetHeader("Content-Type", "text/event-stream")
	hctx.SetHeader("Cache-Control", "no-store")
	hctx.SetHeader("X-Accel-Buffering", "no") // nginx: do not buffer
	hctx.SetStatus(http.StatusOK)
	bw := hctx.BodyWriter()
	w := &sseWriter{w: bw.(http.ResponseWriter), rc: http.NewResponseController(bw.(http.ResponseWriter))}
	// The request has no body to read: without this, the server's
	// ReadTimeout would end the stream's context.
	_ = w.rc.SetReadDeadline(time.Time{})
	// The guard runs beside the replay and the writes, from the start.
	guard := s.guardStream(ctx, cancel, w, req, slot)
	defer guard.finish(w)
	if err := w.write([]byte("retry: 2000\n\n")); err != nil {
		return
	}
	sent := sub.Start
	if req.last >= 0 {
		var err error
		if sent, err = s.replayStream(ctx, w, req, sub.Start); err != nil {
			if ctx.Err() == nil {
				s.cfg.Logger.Warn("stream: replay failed", "request_id", infoFrom(ctx).ID, "err", err)
			}
			return
		}
	}
	heartbeat := time.NewTicker(s.cfg.StreamHeartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-heartbeat.C:
			if w.write([]byte(": heartbeat\n\n")) != nil {
				return
			}
		case e, ok := <-sub.C:
			if !ok {
				// The hub stopped (shutdown) or this stream fell behind: the
				// client reconnects with Last-Event-ID and loses nothing.
				_ = w.write([]byte(": reconnect with Last-Event-ID\n\n"))
				return
			}
			if !e.Pos.After(sent) {
				continue
			}
			if w.event(e.ID, e.Kind, e.Data) != nil {
				return
			}
			sent = e.Pos
		}
	}
}

// replayStream sends the events after the client's Last-Event-ID up to
// the subscription's start and returns the position the client now has.
// An id the stream does not hold (pruned after its 48 hours, or never one
// of ours) is answered with a resync event, and the stream goes on live.
func (s *Server) replayStream(ctx context.Context, w *sseWriter, req streamRequest, upTo domain.StreamPos) (domain.StreamPos, error) {
	pctx, cancel := context.WithTimeout(ctx, StreamQueryTimeout)
	after, ok, err := s.cfg.StreamData.StreamPosOf(pctx, req.last)
	cancel()
	if err != nil {
		return after, err
	}
	if !ok {
		last := strconv.FormatInt(req.last, 10)
		data, _ := json.Marshal(StreamResync{LastEventID: last, Detail: "event " + last + " is no longer held (events are kept at least " +
			"24 hours): reload the current state from the REST endpoints (screener, reports); live events follow"})
		return upTo, w.event(0, "resync", data)
	}
	for upTo.After(after) {
		page, full, err := s.replayPage(ctx, req.client.ID, req.filter, after, upTo)
		if err != nil {
			return after, err
		}
		for _, e := range page {
			if err := w.event(e.ID, e.Kind, e.Data); err != nil {
				return after, err
			}
			after = e.Pos
		}
		if !full {
			break
		}
	}
	if upTo.After(after) {
		after = upTo
	}
	return after, nil
}

// replayPage reads and renders one page of a replay: its database work
// takes one of the Config.StreamReplays tokens (at most half of them per
// client: replayPool) and has
// StreamQueryTimeout, and none of it waits on the client (the page
// is written after). full reports a page of streamReplayPage events: more
// may follow.
func (s *Server) replayPage(ctx context.Context, clientID string, f store.StreamFilter, after, upTo domain.StreamPos) (page []stream.Event, full bool, err error) {
	release, err := s.replays.acquire(ctx, clientID)
	if err != nil {
		return nil, false, err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, StreamQueryTimeout)
	defer cancel()
	events, err := s.cfg.StreamData.ReplayStreamEvents(ctx, f, after, upTo, streamReplayPage)
	if err != nil {
		return nil, false, err
	}
	page = make([]stream.Event, len(events))
	for i, e := range events {
		data, err := s.RenderStreamEvent(ctx, e)
		if err != nil {
			return nil, false, err
		}
		page[i] = stream.Event{StreamEvent: e, Data: data}
	}
	return page, len(events) == streamReplayPage, nil
}

// SandboxSyntheticIDPrefix starts the data id of a sandbox stream's synthetic
// verdict_changed events (never sent as webhooks): "sbx_4211".
const SandboxSyntheticIDPrefix = "sbx_"

// RenderStreamEvent is an event's data line (the hub's Renderer): the
// webhook body for verdict_changed, the combination's rows for screener.
func (s *Server) RenderStreamEvent(ctx context.Context, e domain.StreamEvent) ([]byte, error) {
	switch e.Kind {
	case domain.EventVerdictChanged:
		v := e.Verdict
		if v == nil {
			return nil, fmt.Errorf("api: stream event %d has no verdict event", e.ID)
		}
		id := webhook.EventID(v.EventID)
		if s.cfg.Sandbox && e.SandboxClientID == "" {
			// The sandbox's own synthetic events number their verdict events
			// apart from the live ones a push carries (its webhook-id): a
			// prefix keeps the two from colliding in a client's de-duplication.
			id = SandboxSyntheticIDPrefix + id
		}
		return json.Marshal(StreamVerdictChanged{ID: id, Event: domain.EventVerdictChanged,
			Market: e.Market, Symbol: v.Symbol, OldVerdict: analytics.Verdict(v.OldVerdict), NewVerdict: analytics.Verdict(v.NewVerdict),
			OverallScore: v.OverallScore, Timestamp: v.At.UTC().Format(time.RFC3339), ModelVersion: v.ModelVersion,
			Sandbox: e.SandboxClientID != ""})
	case domain.EventScreener:
		rows, err := s.cfg.StreamData.Tickers(ctx, domain.Combination{Market: e.Market, Exchange: e.Exchange, Instrument: e.Instrument})
		if err != nil {
			return nil, err
		}
		out := StreamScreener{Event: domain.EventScreener, Market: e.Market, Exchange: e.Exchange,
			Instrument: e.Instrument, Rows: make([]ScreenerRecord, len(rows))}
		for i, t := range rows {
			out.Rows[i] = ScreenerRecord{Symbol: t.Symbol, Price: t.Price, ChangePct: t.ChangePct, Volume: t.Volume, UpdatedAt: t.UpdatedAt}
		}
		return json.Marshal(out)
	case domain.EventAlert:
		if e.Alert == nil {
			return nil, fmt.Errorf("api: stream event %d has no alert event", e.ID)
		}
		return alertStreamData(e)
	}
	return nil, fmt.Errorf("api: unknown stream event kind %q", e.Kind)
}

// alertStreamData is an alert event's data: the alert.triggered body of
// its webhook deliveries.
func alertStreamData(e domain.StreamEvent) ([]byte, error) {
	var p struct {
		AlertID   string         `json:"alert_id"`
		AlertName string         `json:"alert_name"`
		Symbol    string         `json:"symbol"`
		At        time.Time      `json:"at"`
		Values    map[string]any `json:"values"`
	}
	if err := json.Unmarshal(e.Alert.Payload, &p); err != nil {
		return nil, fmt.Errorf("api: stream event %d: alert payload: %w", e.ID, err)
	}
	return webhook.AlertBody(e.Alert.EventID, p.AlertID, p.AlertName, e.Market, p.Symbol, p.At, p.Values, e.SandboxClientID != ""), nil
}
