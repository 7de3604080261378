package api

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/screen"
)

// syntheticSnapshot is n crypto assets scored in swing, with a screener
// row and a full set of factors each.
func syntheticSnapshot(n int) *screenSnapshot {
	snap := &screenSnapshot{newest: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	for i := range n {
		res := &analytics.Result{OverallScore: i*37%201 - 100, TechnicalScore: i*17%201 - 100, Verdict: analytics.VerdictNeutral, ModelVersion: "v1"}
		if res.OverallScore >= 20 {
			res.Verdict = analytics.VerdictGrowth
		}
		for j, name := range analytics.FactorNames[:40] {
			res.Factors = append(res.Factors, analytics.Factor{Name: name, Value: strconv.Itoa((i + j*7) % 100),
				Sentiment: analytics.Sentiments[(i+j)%3], Weight: 0.025, Group: analytics.GroupOscillator})
		}
		sym := fmt.Sprintf("S%05d_USDT", i)
		a := screen.NewAsset("crypto", sym, &domain.Ticker{Symbol: sym, Price: float64(1 + i%1000), Volume: float64(i) * 1e4},
			map[analytics.Style]*analytics.Result{analytics.Swing: res})
		a.Exchange, a.Instrument = "binance", "spot"
		a.Index()
		snap.assets = append(snap.assets, a)
	}
	return snap
}

// BenchmarkScreenQuery13k: one query's evaluation, sort and encoding over
// 13,000 assets (the handler's work past decoding and admission); "new":
// with the compilation of an expression never seen before.
func BenchmarkScreenQuery13k(b *testing.B) {
	snap := syntheticSnapshot(13000)
	for _, where := range []string{
		`verdict == "growth" && factors.rsi_14.value < 70`,
		`swing.overall_score > 0 && factors.macd_12_26_9.sentiment == "bullish" && volume > 1e6 || price > 900.0`,
	} {
		for _, fresh := range []bool{false, true} {
			name := where[:20]
			if fresh {
				name = "new " + name
			}
			b.Run(name, func(b *testing.B) {
				n := 0
				p, err := screen.Compile("crypto", where)
				if err != nil {
					b.Fatal(err)
				}
				o, err := parseOrderBy(p, "overall_score desc")
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if fresh {
						// a never-repeated expression: compiled for this query
						n++
						if p, err = screen.Compile("crypto", fmt.Sprintf("%s && overall_score > -%d", where, 101+n)); err != nil {
							b.Fatal(err)
						}
					}
					hits, err := runQuery(snap, p, analytics.Swing, o, nil, 50)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := encodeQueryPage(snap, p, analytics.Swing, o, hits, "t", 50); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// The keyset order: nulls last both ways, ties by symbol, and a cursor
// key resumes right after its item.
func TestQueryOrder(t *testing.T) {
	t.Parallel()
	one, two, null := scalarKey(screen.Scalar{Num: 1}, "B"), scalarKey(screen.Scalar{Num: 2}, "A"), scalarKey(screen.Scalar{Null: true}, "A")
	if compareKeys(&one, &two, false) >= 0 || compareKeys(&one, &two, true) <= 0 {
		t.Error("numbers do not order by value")
	}
	if compareKeys(&null, &one, false) <= 0 || compareKeys(&null, &one, true) <= 0 {
		t.Error("null is not last in both directions")
	}
	tie := scalarKey(screen.Scalar{Num: 1}, "A")
	if compareKeys(&tie, &one, true) >= 0 {
		t.Error("ties do not order by symbol")
	}
	text := scalarKey(screen.Scalar{Text: true, Str: "x"}, "A")
	back, err := decodeQueryCursor(encodeQueryCursor(text, "tag"), "tag")
	if err != nil || compareKeys(back, &text, false) != 0 {
		t.Errorf("cursor round trip: %+v, %v", back, err)
	}
	if _, err := decodeQueryCursor(encodeQueryCursor(text, "tag"), "other"); err == nil {
		t.Error("a cursor of another query was accepted")
	}
}

// A kept page is the answer of its snapshot only: the market's next
// snapshot (a rescoring) misses it, and so does another request.
func TestScreenPagesFollowTheSnapshot(t *testing.T) {
	var c screenPages
	a, b := syntheticSnapshot(2), syntheticSnapshot(2)
	c.put(a, "q1", []byte("page of a"))
	if got := c.get(a, "q1"); string(got) != "page of a" {
		t.Fatalf("the same snapshot and request: %q", got)
	}
	if got := c.get(b, "q1"); got != nil {
		t.Fatalf("another snapshot: %q, want a miss", got)
	}
	if got := c.get(a, "q2"); got != nil {
		t.Fatalf("another request: %q, want a miss", got)
	}
	for i := range maxCachedPages {
		c.put(b, strconv.Itoa(i), []byte("x"))
	}
	if len(c.m) > maxCachedPages {
		t.Fatalf("%d pages kept, want at most %d", len(c.m), maxCachedPages)
	}
}

// The page is what encoding/json writes for its items and values (the
// encoder writes it without reflection), and a value JSON cannot carry
// is null instead of failing the query.
func TestQueryPageIsMarshal(t *testing.T) {
	t.Parallel()
	snap := syntheticSnapshot(300)
	snap.assets[7].Exchange = `bin"ance<&>`
	snap.assets[9].Row.Price = math.NaN()
	p, err := screen.Compile("crypto", `price > -1.0 || factors.rsi_14.value < 50 || symbol.startsWith("S0")`)
	if err != nil {
		t.Fatal(err)
	}
	o, err := parseOrderBy(p, "change_pct asc")
	if err != nil {
		t.Fatal(err)
	}
	hits, err := runQuery(snap, p, analytics.Swing, o, nil, 400)
	if err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{len(hits), 20} {
		got, err := encodeQueryPage(snap, p, analytics.Swing, o, hits, "tag", limit)
		if err != nil {
			t.Fatal(err)
		}
		// The reference: each item marshalled, then its variables.
		want := []byte(`{"items":[`)
		shown := hits
		var next any
		if len(hits) > limit {
			shown = hits[:limit]
			next = encodeQueryCursor(shown[len(shown)-1].key, "tag")
		}
		for i, h := range shown {
			if i > 0 {
				want = append(want, ',')
			}
			r := h.asset.Report(analytics.Swing)
			item, _ := json.Marshal(ScreenerQueryItem{Market: h.asset.Market, Exchange: h.asset.Exchange, Instrument: h.asset.Instrument,
				Symbol: h.asset.Symbol, OverallScore: r.OverallScore, Verdict: r.Verdict})
			want = append(want, item[:len(item)-1]...)
			for _, n := range []string{"change_pct", "factors.rsi_14.value", "price"} {
				get, _ := p.Field(n)
				v, err := json.Marshal(get(h.asset))
				if err != nil {
					v = []byte("null")
				}
				k, _ := json.Marshal(n)
				want = append(append(append(append(want, ','), k...), ':'), v...)
			}
			want = append(want, '}')
		}
		nc, _ := json.Marshal(next)
		want = append(append(append(want, `],"next_cursor":`...), nc...), '}')
		if string(got) != string(want) {
			t.Fatalf("limit %d:\n got %s\nwant %s", limit, got, want)
		}
		if !json.Valid(got) {
			t.Fatalf("not JSON: %s", got)
		}
	}
}
