package analytics

import "github.com/marketscreener/market/domain"

// Style is a trading style; it picks the candle timeframe that is scored.
type Style string

// The trading styles.
const (
	Scalp    Style = "scalp"    // 15m candles
	Intraday Style = "intraday" // 1h candles
	Swing    Style = "swing"    // 4h candles
	Position Style = "position" // 1d candles
)

// DefaultStyle is used when the client names none.
const DefaultStyle = Swing

// Styles lists every style, shortest horizon first.
var Styles = []Style{Scalp, Intraday, Swing, Position}

// ScoredStyles are the styles a market is scored in: crypto in every
// style, the other markets in the default one (style changes crypto only).
func ScoredStyles(m domain.Market) []Style {
	if m == domain.Crypto {
		return Styles
	}
	return []Style{DefaultStyle}
}

// ParseStyle parses a style as written on the wire; the empty string means
// DefaultStyle.
func ParseStyle(s string) (Style, bool) {
	if s == "" {
		return DefaultStyle, true
	}
	for _, st := range Styles {
		if string(st) == s {
			return st, true
		}
	}
	return "", false
}

// Timeframe is the candle timeframe a style is scored on.
func (s Style) Timeframe() domain.Timeframe {
	switch s {
	case Scalp:
		return domain.TF15m
	case Intraday:
		return domain.TF1h
	case Position:
		return domain.TF1d
	}
	return domain.TF4h
}
