package store

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/marketscreener/market/domain/analytics"
)

// appendResult writes what json.Marshal writes, byte for byte, over
// random results (nil and empty factors and args, texts that need
// escapes, floats in both of Marshal's formats), and refuses what it
// refuses.
func TestResultJSONIsMarshal(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	texts := []string{"", "rsi_14", "bullish", `a "quoted" <b> & \ text`, "é ü 日本", "line\nbreak\t", "\u2028", "\x01"}
	floats := []float64{0, math.Copysign(0, -1), 0.05, 1e-7, 1.5e-6, 1e21, 123456789.123, -2.5, 1e20, 0.1 + 0.2}
	text := func() string { return texts[rng.IntN(len(texts))] }
	num := func() float64 { return floats[rng.IntN(len(floats))] }
	message := func() analytics.Message {
		m := analytics.Message{Key: text()}
		switch rng.IntN(4) {
		case 3: // a literal out of order, a name twice
			m.Args = analytics.Args{{Name: "b", Value: text()}, {Name: "a", Value: text()}, {Name: "b", Value: text()}}
		case 1:
			m.Args = analytics.Args{}
		case 2:
			args := map[string]string{}
			for k := rng.IntN(4) + 1; k > 0; k-- {
				args[text()+string(rune('a'+rng.IntN(5)))] = text()
			}
			m.Args = analytics.ArgsOf(args)
		}
		return m
	}
	var buf []byte
	for n := 0; n < 3000; n++ {
		var r *analytics.Result
		if n > 0 {
			r = &analytics.Result{TechnicalScore: rng.IntN(201) - 100, OverallScore: rng.IntN(201) - 100,
				Verdict: analytics.Verdict(text()), ModelVersion: text(), Summary: message(),
				Scenario: analytics.Scenario{Support: num(), Resistance: num(), LastClose: num(), Text: message(), Invalidation: message()}}
			if rng.IntN(2) == 0 {
				f := rng.IntN(201) - 100
				r.FundamentalScore = &f
			}
			switch rng.IntN(3) {
			case 1:
				r.Factors = []analytics.Factor{}
			case 2:
				for k := rng.IntN(5) + 1; k > 0; k-- {
					r.Factors = append(r.Factors, analytics.Factor{Name: text(), Value: text(), Sentiment: analytics.Sentiment(text()),
						Weight: num(), Group: text(), Contribution: num(), Text: message()})
				}
			}
		}
		want, werr := json.Marshal(r)
		got, gerr := appendResult(buf[:0], r)
		buf = got
		if werr != nil || gerr != nil || string(got) != string(want) {
			t.Fatalf("result %d:\n got %s (%v)\nwant %s (%v)", n, got, gerr, want, werr)
		}
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		r := &analytics.Result{Factors: []analytics.Factor{{Weight: 0.5, Contribution: bad}}}
		if _, err := json.Marshal(r); err == nil {
			t.Fatal("Marshal took a float JSON cannot carry")
		}
		if _, err := appendResult(nil, r); err == nil {
			t.Errorf("%v accepted", bad)
		}
		if _, err := appendResult(nil, &analytics.Result{Scenario: analytics.Scenario{LastClose: bad}}); err == nil {
			t.Errorf("%v in the scenario accepted", bad)
		}
	}
}
