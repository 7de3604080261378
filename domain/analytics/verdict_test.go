package analytics

import (
	"testing"

	"github.com/marketscreener/market/domain"
)

func TestDecideVerdict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		prev    Verdict
		overall int
		want    Verdict
	}{
		{"", 20, VerdictGrowth},
		{"", 19, VerdictNeutral},
		{"", -20, VerdictDecline},
		{"", -19, VerdictNeutral},
		{"", 0, VerdictNeutral},
		{VerdictNeutral, 19, VerdictNeutral},
		// A standing growth holds while the score stays above +10.
		{VerdictGrowth, 11, VerdictGrowth},
		{VerdictGrowth, 10, VerdictNeutral},
		{VerdictGrowth, -20, VerdictDecline},
		{VerdictGrowth, -15, VerdictNeutral},
		{VerdictDecline, -11, VerdictDecline},
		{VerdictDecline, -10, VerdictNeutral},
		{VerdictDecline, 25, VerdictGrowth},
		{VerdictDecline, 15, VerdictNeutral},
		{"bogus", 15, VerdictNeutral},
	}
	for _, tt := range tests {
		if got := DecideVerdict(tt.prev, tt.overall); got != tt.want {
			t.Errorf("DecideVerdict(%q, %d) = %q, want %q", tt.prev, tt.overall, got, tt.want)
		}
	}
}

func TestStyles(t *testing.T) {
	t.Parallel()
	want := map[Style]domain.Timeframe{Scalp: domain.TF15m, Intraday: domain.TF1h, Swing: domain.TF4h, Position: domain.TF1d}
	for st, tf := range want {
		got, ok := ParseStyle(string(st))
		if !ok || got != st || got.Timeframe() != tf {
			t.Errorf("ParseStyle(%q) = %q %v, timeframe %s; want %s", st, got, ok, got.Timeframe(), tf)
		}
	}
	if st, ok := ParseStyle(""); !ok || st != DefaultStyle || DefaultStyle != Swing {
		t.Errorf("empty style = %q %v, want swing", st, ok)
	}
	for _, bad := range []string{"Swing", "daytrade", " swing"} {
		if _, ok := ParseStyle(bad); ok {
			t.Errorf("ParseStyle(%q) accepted", bad)
		}
	}
}

func TestParseLang(t *testing.T) {
	t.Parallel()
	for _, l := range Langs {
		if got, ok := ParseLang(string(l)); !ok || got != l {
			t.Errorf("ParseLang(%q) = %q %v", l, got, ok)
		}
	}
	if l, ok := ParseLang(""); !ok || l != "ru" {
		t.Errorf("empty lang = %q, want ru", l)
	}
	for _, bad := range []string{"de", "EN", "en-US"} {
		if _, ok := ParseLang(bad); ok {
			t.Errorf("ParseLang(%q) accepted", bad)
		}
	}
}
