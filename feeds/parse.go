package feeds

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/marketscreener/market/domain"
)

// errBadField marks a field that is missing or not a finite number.
var errBadField = errors.New("bad field")

func decodeJSON(body []byte, dst any) error {
	if err := json.Unmarshal(body, dst); err != nil {
		return fmt.Errorf("decoding response: %w", err)
	}
	return nil
}

// parseDecimal parses an upstream decimal string ("0.0163"); empty,
// non-numeric and non-finite values are errors.
func parseDecimal(name, s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("%s: missing: %w", name, errBadField)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%s: %q is not a finite number: %w", name, s, errBadField)
	}
	return v, nil
}

// decimalField is an upstream decimal string that may be absent (nil),
// the name errors call it by, and where its value goes.
type decimalField struct {
	name string
	raw  *string
	dst  *float64
}

// parseDecimalFields parses fields in order and stops at the first that
// is missing or not a finite number.
func parseDecimalFields(fields ...decimalField) error {
	for _, f := range fields {
		if f.raw == nil {
			return fmt.Errorf("%s: missing: %w", f.name, errBadField)
		}
		v, err := parseDecimal(f.name, *f.raw)
		if err != nil {
			return err
		}
		*f.dst = v
	}
	return nil
}

// parseRawNumber parses a JSON value that may be a number or a decimal
// string, as mixed kline arrays are.
func parseRawNumber(name string, raw json.RawMessage) (float64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return 0, fmt.Errorf("%s: missing: %w", name, errBadField)
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("%s: %w", name, errBadField)
		}
		return parseDecimal(name, s)
	}
	return parseDecimal(name, string(raw))
}

// parseRawMillis parses a millisecond Unix timestamp given as a JSON
// number or string.
func parseRawMillis(name string, raw json.RawMessage) (time.Time, error) {
	v, err := parseRawNumber(name, raw)
	if err != nil {
		return time.Time{}, err
	}
	if v <= 0 || v > 1e14 || v != math.Trunc(v) {
		return time.Time{}, fmt.Errorf("%s: %v is not a millisecond timestamp: %w", name, v, errBadField)
	}
	return time.UnixMilli(int64(v)).UTC(), nil
}

// parseCandleRows parses a response that is an array of candle rows
// (arrays of JSON numbers and decimal strings) with row, one row at a
// time; any bad row fails the whole response. Rows served newest first
// are reversed; the result is oldest first and validated.
func parseCandleRows(body []byte, newestFirst bool, row func(i int, r []json.RawMessage) (domain.Candle, error)) ([]domain.Candle, error) {
	var rows [][]json.RawMessage
	if err := decodeJSON(body, &rows); err != nil {
		return nil, err
	}
	out := make([]domain.Candle, 0, len(rows))
	for i, r := range rows {
		c, err := row(i, r)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if newestFirst {
		reverseCandles(out)
	}
	if err := domain.ValidateCandles(out); err != nil {
		return nil, err
	}
	return out, nil
}

// clipCandles keeps open times ≥ since and, of those, the first limit
// (oldest first, so a backfill walks forward from since).
func clipCandles(cs []domain.Candle, since time.Time, limit int) []domain.Candle {
	i := 0
	for i < len(cs) && cs[i].Time.Before(since) {
		i++
	}
	cs = cs[i:]
	if limit > 0 && len(cs) > limit {
		cs = cs[:limit]
	}
	return cs
}

// reverseCandles turns a newest-first response into oldest-first.
func reverseCandles(cs []domain.Candle) {
	for i, j := 0, len(cs)-1; i < j; i, j = i+1, j-1 {
		cs[i], cs[j] = cs[j], cs[i]
	}
}
