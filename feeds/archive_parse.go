package feeds

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	"github.com/marketscreener/market/domain"
)

// microsFrom is the smallest open time read as microseconds: spot files
// from 2025-01-01 on count in microseconds (1.7e15), older ones and
// futures in milliseconds (1.7e12); 1e14 ms would be the year 5138.
const microsFrom = 1e14

// ParseArchiveKlines parses an archive kline CSV: rows of open time,
// open, high, low, close, volume, close time and more (ignored). The
// first line may be a header row (futures files have one from some date
// on, spot files none): a first line whose first field is not a number
// is skipped; a bad line anywhere else fails the file. Open times are in
// milliseconds or microseconds, told apart by size.
func ParseArchiveKlines(data []byte) ([]domain.Candle, error) {
	out := make([]domain.Candle, 0, bytes.Count(data, []byte{'\n'})+1)
	for n := 1; len(data) > 0; n++ {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		line = bytes.TrimRight(line, "\r ")
		if len(line) == 0 {
			continue
		}
		c, err := parseArchiveRow(line)
		if err != nil {
			if n == 1 && (line[0] < '0' || line[0] > '9') {
				continue // the header row
			}
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, c)
	}
	return out, nil
}

func parseArchiveRow(line []byte) (domain.Candle, error) {
	var fields [6][]byte
	for i := range fields {
		j := bytes.IndexByte(line, ',')
		if j < 0 {
			if i < len(fields)-1 {
				return domain.Candle{}, fmt.Errorf("%d fields, want at least 6: %w", i+1, errBadField)
			}
			j = len(line)
		}
		fields[i] = line[:j]
		if j < len(line) {
			line = line[j+1:]
		} else {
			line = nil
		}
	}
	ts, err := strconv.ParseInt(string(fields[0]), 10, 64)
	if err != nil || ts <= 0 {
		return domain.Candle{}, fmt.Errorf("open time %q: %w", fields[0], errBadField)
	}
	var c domain.Candle
	if ts >= microsFrom {
		c.Time = time.UnixMicro(ts).UTC()
	} else {
		c.Time = time.UnixMilli(ts).UTC()
	}
	for i, dst := range []*float64{&c.Open, &c.High, &c.Low, &c.Close, &c.Volume} {
		name := [...]string{"open", "high", "low", "close", "volume"}[i]
		if *dst, err = parseDecimal(name, string(fields[i+1])); err != nil {
			return domain.Candle{}, err
		}
	}
	return c, nil
}
