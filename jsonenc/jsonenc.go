// Package jsonenc appends values to JSON byte for byte as encoding/json
// writes them, without its reflection: for the hot encoders (alert event
// payloads, screen query pages).
package jsonenc

import (
	"encoding/json"
	"math"
	"strconv"
)

// AppendValue appends v as encoding/json writes it, for the values of
// package screen (nil, bool, int64, float64, string); any other kind goes
// through Marshal. A value JSON cannot carry (a NaN, an infinity, a value
// Marshal refuses) is written null.
func AppendValue(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, v)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case string:
		return AppendString(b, v)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return append(b, "null"...)
		}
		return AppendFloat(b, v)
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// AppendFloat is encoding/json's float64 format: the shortest
// representation, in exponent form below 1e-6 and from 1e21, with a
// one-digit negative exponent written without its leading zero.
func AppendFloat(b []byte, f float64) []byte {
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

// AppendString writes s as a JSON string: directly when it holds no
// byte encoding/json escapes, through Marshal otherwise.
func AppendString(b []byte, s string) []byte {
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
