package store

import (
	"slices"

	"github.com/marketscreener/market/jsonenc"
)

// readJSON is an alert event's payload (the values its condition read) as
// encoding/json writes it, byte for byte: keys sorted, numbers and
// strings as Marshal formats them. A close writes thousands of events, and
// Marshal's reflection over each map was a tenth of its alert work. A
// value of another kind than the screen's (int64, float64, string, bool,
// nil) goes through Marshal. A value JSON cannot carry (a NaN, an
// infinity) is written null: the payload reports what was read, and a
// value that fails to encode must not fail the save of a whole batch.
func readJSON(read map[string]any) string {
	keys := make([]string, 0, len(read))
	for k := range read {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := make([]byte, 0, 32*len(keys)+2)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, k)
		b = append(b, ':')
		b = jsonenc.AppendValue(b, read[k])
	}
	return string(append(b, '}'))
}
