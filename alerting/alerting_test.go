package alerting_test

import (
	"testing"

	"github.com/marketscreener/market/alerting"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

// A condition is re-evaluated only on a rescoring of a style it reads;
// one reading the screener row, on every rescoring.
func TestReadsOnlyTheStylesTheConditionNames(t *testing.T) {
	t.Parallel()
	m := &alerting.Matcher{}
	for _, tc := range []struct {
		where string
		want  map[analytics.Style]bool
	}{
		{`verdict == "growth"`, map[analytics.Style]bool{analytics.Swing: true}},
		{`scalp.overall_score > 40 && position.verdict == "growth"`, map[analytics.Style]bool{analytics.Scalp: true, analytics.Position: true}},
		{`volume > 1e6 && swing.overall_score > 10`, map[analytics.Style]bool{analytics.Scalp: true, analytics.Intraday: true, analytics.Swing: true, analytics.Position: true}},
	} {
		a := domain.Alert{Market: domain.Crypto, Expression: tc.where}
		for _, st := range analytics.Styles {
			if got := m.Condition(a).Reads(st); got != tc.want[st] {
				t.Errorf("%s: Reads(%s) = %v, want %v", tc.where, st, got, tc.want[st])
			}
		}
	}
	if m.Compiled() != 3 {
		t.Errorf("compiled %d programs, want one per condition (3)", m.Compiled())
	}
}
