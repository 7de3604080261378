package screen

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"

	"github.com/marketscreener/market/domain/analytics"
)

// What the shape scan takes out as a literal, and what it leaves to a
// full compile.
func TestShapeOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		expr  string
		shape string // "" when the expression has no shape
		lits  []any
	}{
		{`rsi < 30`, "rsi < \x00i", []any{int64(30)}},
		{"rsi   <\n\t30.5", "rsi < \x00d", []any{30.5}},
		{`a>-5&&b<1e3`, "a>-\x00i&&b<\x00d", []any{int64(5), 1e3}},
		{`verdict == "growth" || v in ['a', ""]`, "verdict == \x00s6\x00 || v in [\x00s1\x00, \x00s0\x00]", []any{"growth", "a", ""}},
		{`rsi_14 > 2`, "rsi_14 > \x00i", []any{int64(2)}},
		{`x > 1 // a comment`, "", nil},
		{`s == r"raw"`, "", nil},
		{`s == b"bytes"`, "", nil},
		{`s == "a\"b"`, "", nil},
		{`s == """triple"""`, "", nil},
		{`s == "unterminated`, "", nil},
		{`s == "é"`, "", nil},
		{`x > 0x1F`, "", nil},
		{`x > 5u`, "", nil},
		{`x > .5`, "", nil},
		{`x > 1.`, "", nil},
		{`x > 1e`, "", nil},
		{`x > 9223372036854775808`, "", nil},
		{`x > 1e999`, "", nil},
		{"x > \x00i", "", nil},
	} {
		shape, lits, ok := shapeOf(c.expr)
		if ok != (c.shape != "") || shape != c.shape {
			t.Errorf("%q: shape %q (%v), want %q", c.expr, shape, ok, c.shape)
			continue
		}
		var got []any
		for _, l := range lits {
			got = append(got, l.val.Value())
		}
		if !slices.Equal(got, c.lits) {
			t.Errorf("%q: literals %v, want %v", c.expr, got, c.lits)
		}
	}
}

// An expression compiled from its shape's template answers as the same
// expression compiled in full by cel-go, and refuses what it refuses:
// random expressions, each compiled after a sibling of its shape (other
// numbers, other words of the same length).
func TestShapesEqualCEL(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	assets := randomAssets(rng, 60)
	table := NewTable(assets)
	const exprs = 3000
	fromTemplate, matched := 0, 0
	for n := 0; n < exprs; n++ {
		g := exprGen{rng: rng}
		expr := g.boolean(4)
		style := analytics.Styles[rng.IntN(len(analytics.Styles))]
		shape, lits, ok := shapeOf(expr)
		if !ok || len(lits) == 0 {
			continue
		}
		sibling := siblingOf(rng, expr, lits)
		if s, _, ok := shapeOf(sibling); !ok || s != shape {
			t.Fatalf("%q and its sibling %q: shapes %q and %q", expr, sibling, shape, s)
		}
		c := newShapeCache()
		_, _ = compileWith("crypto", style, sibling, MaxEvalCost, c)
		p, err := compileWith("crypto", style, expr, MaxEvalCost, c)
		full, ferr := compileWith("crypto", style, expr, MaxEvalCost, nil)
		if (err == nil) != (ferr == nil) {
			t.Fatalf("%q after %q: %v; in full: %v", expr, sibling, err, ferr)
		}
		if err != nil {
			continue
		}
		if (p.direct == nil) != (full.direct == nil) || !slices.Equal(p.Variables(), full.Variables()) {
			t.Fatalf("%q after %q: translated %v reads %v; in full %v reads %v", expr, sibling,
				p.direct != nil, p.Variables(), full.direct != nil, full.Variables())
		}
		if p.checked != nil {
			continue // compiled in full: its sibling's shape had no template
		}
		fromTemplate++
		matched += sameAsCEL(t, p, expr, style, assets, table)
	}
	t.Logf("%d expressions: %d from their shape's template; %d matches", exprs, fromTemplate, matched)
	if fromTemplate < exprs/4 || matched == 0 {
		t.Fatalf("%d of %d from a template, %d matches", fromTemplate, exprs, matched)
	}
}

// siblingOf is expr with each literal replaced by another of its kind:
// a number by another, a string by another of the same length.
func siblingOf(rng *rand.Rand, expr string, lits []slotLit) string {
	var b strings.Builder
	last := 0
	for _, l := range lits {
		b.WriteString(expr[last:l.off])
		end := l.off
		switch v := l.val.(type) {
		case types.String:
			r := []byte(strconv.Quote(string(v)))
			for i := 1; i < len(r)-1; i++ {
				r[i] = "abcdefgrowth_USDT"[rng.IntN(17)]
			}
			b.Write(r)
			end += len(r)
		case types.Int:
			b.WriteString(strconv.FormatInt(rng.Int64N(200), 10))
			end, _, _ = scanNumber(expr, l.off)
		case types.Double:
			b.WriteString(strconv.FormatFloat(float64(rng.IntN(2000))/10, 'f', 1, 64))
			end, _, _ = scanNumber(expr, l.off)
		}
		last = end
	}
	b.WriteString(expr[last:])
	return b.String()
}

// A template serves the numbers of its slots, signs included, and keeps
// the variables the expression reads.
func TestShapeTemplateLiterals(t *testing.T) {
	t.Parallel()
	a := testAsset()
	c := newShapeCache()
	for _, x := range []struct {
		expr string
		want bool
	}{
		{`overall_score > -5 && verdict == "growth"`, true},
		{`overall_score > 500 && verdict == "growth"`, false},
		{`overall_score > -500 && verdict == "shrink"`, false},
		{`overall_score - 40 > 4`, true},
		{`overall_score - 40 > 6`, false},
		{`overall_score in [1, 2, 45]`, true},
		{`overall_score in [1, 2, 46]`, false},
		{`overall_score + - 40 > 0`, true},
		{`overall_score + - 50 > 0`, false},
	} {
		p, err := compileWith("crypto", analytics.Swing, x.expr, MaxEvalCost, c)
		if err != nil {
			t.Fatalf("%s: %v", x.expr, err)
		}
		if got, err := p.Match(a); err != nil || got != x.want {
			t.Errorf("%s: %v, %v; want %v", x.expr, got, err, x.want)
		}
		if got, err := p.matchCEL(&activation{p: p, a: a}); err != nil || got != x.want {
			t.Errorf("%s by cel-go: %v, %v; want %v", x.expr, got, err, x.want)
		}
	}
	if len(c.byKey) != 5 {
		t.Errorf("%d templates, want 5 (one a shape)", len(c.byKey))
	}
}

// BenchmarkCompile: a never-seen expression compiled in full, and one of
// a shape already seen (its numbers new).
func BenchmarkCompile(b *testing.B) {
	const where = `verdict == "growth" && factors.rsi_14.value < 70 && overall_score > -%d`
	for _, c := range []struct {
		name  string
		cache *shapeCache
	}{{"in full", nil}, {"from its shape", newShapeCache()}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n++
				if _, err := compileWith("crypto", analytics.Swing, strings.Replace(where, "%d", strconv.Itoa(n), 1), MaxEvalCost, c.cache); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
