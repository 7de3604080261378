package store

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
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
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONValue(b, read[k])
	}
	return string(append(b, '}'))
}

func appendJSONValue(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, v)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case string:
		return appendJSONString(b, v)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return append(b, "null"...)
		}
		return appendJSONFloat(b, v)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// appendJSONFloat is encoding/json's float64 format: the shortest
// representation, in exponent form below 1e-6 and from 1e21, with a
// one-digit negative exponent written without its leading zero.
func appendJSONFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// appendJSONString writes s as a JSON string: directly when it holds no
// byte encoding/json escapes, through Marshal otherwise.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			raw, _ := json.Marshal(s) // a string always encodes
			return append(b, raw...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
