package store

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// TestReadJSONIsMarshals: an alert event's payload is encoding/json's
// bytes for the values a condition reads (every kind the screen returns,
// floats across the exponent-form bounds, strings that need escaping), and
// a value JSON cannot carry is null instead of an error.
func TestReadJSONIsMarshals(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 33))
	floats := []float64{0, -0.0, 1, -1, 0.1, 1e-6, 9.99e-7, 1e-7, -2.5e-9, 1e20, 1e21, 123456789.123, math.MaxFloat64,
		math.SmallestNonzeroFloat64, 5e-324, 1.5e-300}
	strs := []string{"", "growth", `quo"te`, `back\slash`, "tab\t", "<b>&amp;</b>", "é", "\u2028", "BRK.B", "\x7f"}
	value := func() any {
		switch rng.IntN(6) {
		case 0:
			return nil
		case 1:
			return rng.IntN(2) == 0
		case 2:
			return rng.Int64() - rng.Int64()
		case 3:
			return strs[rng.IntN(len(strs))]
		case 4:
			return floats[rng.IntN(len(floats))]
		}
		return (rng.Float64() - 0.5) * math.Pow(10, float64(rng.IntN(60)-30))
	}
	for i := range 5000 {
		read := map[string]any{}
		for range rng.IntN(6) {
			read[strs[rng.IntN(len(strs))]+"swing.factors.rsi_14.value"[:rng.IntN(27)]] = value()
		}
		want, err := json.Marshal(read)
		if err != nil {
			t.Fatal(err)
		}
		if got := readJSON(read); got != string(want) {
			t.Fatalf("case %d: %q, want %q", i, got, want)
		}
	}
	if got := readJSON(nil); got != "{}" {
		t.Fatalf("nil map: %q, want {}", got)
	}
	got := readJSON(map[string]any{"a": math.NaN(), "b": math.Inf(-1), "c": 2.5, "d": func() {}})
	if want := `{"a":null,"b":null,"c":2.5,"d":null}`; got != want {
		t.Fatalf("non-JSON values: %q, want %q", got, want)
	}
}
