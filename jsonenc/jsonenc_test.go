package jsonenc

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

// AppendValue writes what json.Marshal writes, for every kind the
// screen's values take, and null where Marshal fails.
func TestAppendValueIsMarshal(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	values := []any{nil, true, false, int64(0), int64(-42), int64(math.MaxInt64), int64(math.MinInt64),
		0.0, math.Copysign(0, -1), 1e-7, 1e-6, 123.456, 1e20, 1e21, -2.5e-9, math.MaxFloat64, math.SmallestNonzeroFloat64,
		"", "plain", `q"uote`, `back\slash`, "<tag>&", "tab\there", "é ü 中", "\u2028\u2029", "\x00\x1f", "\xff invalid",
		[]int{1, 2}, map[string]int{"b": 1, "a": 2}}
	for range 2000 {
		values = append(values, math.Float64frombits(rng.Uint64()), rng.NormFloat64()*math.Pow(10, float64(rng.IntN(60)-30)), rng.Int64())
	}
	for _, v := range values {
		want, err := json.Marshal(v)
		if err != nil {
			want = []byte("null")
		}
		if got := AppendValue(nil, v); string(got) != string(want) {
			t.Fatalf("%#v: %s, json.Marshal %s", v, got, want)
		}
	}
}
