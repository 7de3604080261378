package domain

import (
	"strings"
	"time"
)

// EventAlertTriggered is the webhook event of an alert that fired; the
// event stream names it EventAlert.
const (
	EventAlertTriggered = "alert.triggered"
	EventAlert          = "alert"
)

// WebhookEventKinds are the events a webhook subscription receives.
var WebhookEventKinds = []string{EventVerdictChanged, EventAlertTriggered}

// Bounds of an alert's definition.
const (
	MaxAlertNameLen  = 100
	MaxAlertSymbols  = 50
	MaxAlertCooldown = 7 * 24 * 3600 // seconds
	// MaxAlertExpressionLen bounds the text of a condition (the expression
	// language's own limits on depth and cost apply too).
	MaxAlertExpressionLen = 2048
)

// MaxAlerts is how many alerts a client of the tier may hold.
func (t Tier) MaxAlerts() int {
	switch t {
	case Starter:
		return 20
	case Business:
		return 200
	default:
		return 2000
	}
}

// Alert is a condition a client watches on the assets of one market.
type Alert struct {
	ID       string
	ClientID string
	Name     string
	Market   Market
	// Expression is the condition as the client wrote it.
	Expression string
	// Symbols limits the alert to these assets (canonical form); nil means
	// every asset of the market.
	Symbols         []string
	CooldownSeconds int
	CreatedAt       time.Time
}

// Watches reports whether the alert covers the asset.
func (a Alert) Watches(symbol string) bool {
	if a.Symbols == nil {
		return true
	}
	for _, s := range a.Symbols {
		if s == symbol {
			return true
		}
	}
	return false
}

// Cooldown is the least time between two firings on one asset.
func (a Alert) Cooldown() time.Duration { return time.Duration(a.CooldownSeconds) * time.Second }

// NormalizeAlertSymbols checks and canonicalises an alert's symbols (the
// body's symbols): nil stays nil (every asset), duplicates are merged.
func NormalizeAlertSymbols(m Market, raw []string) ([]string, error) {
	if raw == nil {
		return nil, nil
	}
	if len(raw) == 0 {
		return nil, Invalid("body.symbols", raw, "name at least one symbol, or omit symbols to watch every asset of the market")
	}
	if len(raw) > MaxAlertSymbols {
		return nil, Invalid("body.symbols", len(raw), "at most %d symbols", MaxAlertSymbols)
	}
	out := make([]string, 0, len(raw))
	for _, r := range raw {
		s, ok := NormalizeSymbol(m, r)
		if !ok {
			return nil, Invalid("body.symbols", r, "%q is not a %s symbol", r, m)
		}
		dup := false
		for _, o := range out {
			dup = dup || o == s
		}
		if !dup {
			out = append(out, s)
		}
	}
	return out, nil
}

// ValidateAlertDefinition checks what the expression language does not:
// the name, the cooldown and the expression's length.
func ValidateAlertDefinition(name, expression string, cooldown int) error {
	if n := strings.TrimSpace(name); n == "" || len(name) > MaxAlertNameLen {
		return Invalid("body.name", name, "a name of 1 to %d characters", MaxAlertNameLen)
	}
	if cooldown < 0 || cooldown > MaxAlertCooldown {
		return Invalid("body.cooldown_seconds", cooldown, "between 0 and %d seconds (7 days)", MaxAlertCooldown)
	}
	if strings.TrimSpace(expression) == "" {
		return Invalid("body.where", expression, "the condition is empty")
	}
	if len(expression) > MaxAlertExpressionLen {
		return Invalid("body.where", len(expression), "at most %d characters", MaxAlertExpressionLen)
	}
	return nil
}

// AlertState is what is kept of an alert on one asset between rescorings.
type AlertState struct {
	// Known is false before the condition was ever seen to hold.
	Known       bool
	Matched     bool
	LastFiredAt *time.Time
}

// Changed reports whether s differs from before (a state that was not
// known has changed once it is): only a changed state is written back.
func (s AlertState) Changed(before AlertState) bool {
	if s.Known != before.Known || s.Matched != before.Matched {
		return true
	}
	if (s.LastFiredAt == nil) != (before.LastFiredAt == nil) {
		return true
	}
	return s.LastFiredAt != nil && !s.LastFiredAt.Equal(*before.LastFiredAt)
}

// Next is the state after the condition evaluated to matched at instant
// at, and whether the alert fires: on a change from false to true, at
// most once per cooldown. baseline is the condition's value before this
// rescoring when the state is not known.
func (s AlertState) Next(a Alert, matched, baseline bool, at time.Time) (AlertState, bool) {
	before := baseline
	if s.Known {
		before = s.Matched
	}
	fire := matched && !before && (s.LastFiredAt == nil || at.Sub(*s.LastFiredAt) >= a.Cooldown())
	next := AlertState{Known: true, Matched: matched, LastFiredAt: s.LastFiredAt}
	if fire {
		t := at.UTC()
		next.LastFiredAt = &t
	}
	return next, fire
}
