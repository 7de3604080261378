package screen

import (
	"testing"
	"time"

	"github.com/marketscreener/market/domain/analytics"
)

// FuzzCompile: no expression panics, compiles slowly or evaluates slowly,
// and every refusal is an ExprError.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		`overall_score > 40`, `swing.verdict == "growth" && scalp.overall_score > 40`,
		`factors.rsi_14.value < 30 || fundamental_score != null`, `symbol.matches("^(a+)+$")`,
		`[1,2,3].all(x, x > overall_score)`, `((((true))))`, `"a" + "b" == "ab"`, `size(symbol) > 3`,
		`overall_score >`, `1/0 == 0`, `timestamp("2026-01-01T00:00:00Z") < timestamp("2027-01-01T00:00:00Z")`,
	} {
		f.Add(s)
	}
	a := testAsset()
	f.Fuzz(func(t *testing.T, expr string) {
		start := time.Now()
		p, err := CompileStyle("crypto", analytics.Scalp, expr)
		if err != nil {
			if _, ok := IsExprError(err); !ok {
				t.Fatalf("Compile(%q): %v is not an ExprError", expr, err)
			}
		} else {
			_, _, _ = p.Eval(a)
		}
		// Generous: the fuzzer's own instrumentation and a loaded host
		// slow everything down; a blow-up is orders of magnitude more.
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("Compile and Eval of %q took %s", expr, d)
		}
	})
}
