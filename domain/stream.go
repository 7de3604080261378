package domain

import (
	"slices"
	"strings"
	"time"
)

// The kinds of event of the event stream (GET /stream).
const (
	// EventVerdictChanged is the webhook's verdict_changed, streamed.
	EventVerdictChanged = "verdict_changed"
	// EventScreener is a refresh of the screener rows of one combination.
	EventScreener = "screener"
)

// StreamEventKinds lists the kinds in canonical order (EventAlert: alert.go).
var StreamEventKinds = []string{EventVerdictChanged, EventScreener, EventAlert}

// StreamPos is a position in the stream's log: the row's place in commit
// order (migration 00016). The rows committed at any moment are the
// positions up to some n (but for gaps), so "every event after a
// position" never misses one that committed late.
type StreamPos struct {
	Seq int64
}

// After reports whether p comes after q.
func (p StreamPos) After(q StreamPos) bool { return p.Seq > q.Seq }

// StreamRetention is how long the stream's log keeps an event (a resume
// is guaranteed for 24 h; the periodic prune deletes rows older than this).
const StreamRetention = 48 * time.Hour

// StreamEvent is one row of the stream's log. ID is the event's id on the
// wire; Pos orders the events.
type StreamEvent struct {
	ID     int64
	Pos    StreamPos
	Kind   string
	Market Market
	// Verdict is set for EventVerdictChanged.
	Verdict *VerdictChange
	// Exchange and Instrument are set for EventScreener.
	Exchange, Instrument string
	// SandboxClientID is the client whose sandbox key pushed the event
	// (POST /sandbox/verdict-change); "" for the service's own events. A
	// sandbox event reaches that client's sandbox streams and webhooks only.
	SandboxClientID string
	// ClientID is the only client whose streams take the event (its
	// alerts); "" for events every stream may take.
	ClientID string
	// Alert is set for EventAlert.
	Alert *StreamAlert
	At    time.Time
}

// StreamAlert is what an alert event says: its outbox event's id (the
// webhook delivery's) and the event's fields as stored (alert_id,
// alert_name, symbol, at, values).
type StreamAlert struct {
	EventID int64
	Payload []byte
}

// VerdictChange is what a verdict_changed event says.
type VerdictChange struct {
	EventID      int64 // the verdict_events row (the webhook delivery's event)
	Symbol       string
	OldVerdict   string
	NewVerdict   string
	OverallScore int
	At           time.Time
	// ModelVersion is the version of the scoring method that made the new
	// verdict (analytics.Versions).
	ModelVersion string
}

// ParseStreamEventKinds parses the events parameter: a comma-separated
// list of kinds, without duplicates; empty means every kind.
func ParseStreamEventKinds(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return slices.Clone(StreamEventKinds), nil
	}
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !slices.Contains(StreamEventKinds, part) {
			return nil, Invalid("query.events", s, "unknown event %q (allowed: %s)", part, strings.Join(StreamEventKinds, ", "))
		}
		if !slices.Contains(out, part) {
			out = append(out, part)
		}
	}
	if len(out) == 0 {
		return nil, Invalid("query.events", s, "name at least one event (allowed: %s)", strings.Join(StreamEventKinds, ", "))
	}
	slices.SortFunc(out, func(a, b string) int {
		return slices.Index(StreamEventKinds, a) - slices.Index(StreamEventKinds, b)
	})
	return out, nil
}

// MaxStreams is how many event streams a client of the tier may hold open
// at once, over every key and every api replica.
func (t Tier) MaxStreams() int {
	switch t {
	case Starter:
		return 2
	case Business:
		return 10
	default:
		return 50
	}
}
