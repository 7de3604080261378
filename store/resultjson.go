package store

import (
	"fmt"
	"math"
	"strconv"

	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/jsonenc"
)

// appendResult appends r as encoding/json's Marshal writes it, byte for
// byte (TestResultJSONIsMarshal), without its reflection: a close saves
// thousands of results, and Marshal was a tenth of its Go CPU. A float
// JSON cannot carry (NaN, an infinity) is an error, as it is Marshal's.
func appendResult(b []byte, r *analytics.Result) ([]byte, error) {
	if r == nil {
		return append(b, "null"...), nil
	}
	var err error
	b = append(b, `{"technical_score":`...)
	b = strconv.AppendInt(b, int64(r.TechnicalScore), 10)
	b = append(b, `,"fundamental_score":`...)
	if r.FundamentalScore == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(*r.FundamentalScore), 10)
	}
	b = append(b, `,"overall_score":`...)
	b = strconv.AppendInt(b, int64(r.OverallScore), 10)
	b = append(b, `,"verdict":`...)
	b = jsonenc.AppendString(b, string(r.Verdict))
	b = append(b, `,"factors":`...)
	if r.Factors == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Factors {
			f := &r.Factors[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = jsonenc.AppendString(b, f.Name)
			b = append(b, `,"value":`...)
			b = jsonenc.AppendString(b, f.Value)
			b = append(b, `,"sentiment":`...)
			b = jsonenc.AppendString(b, string(f.Sentiment))
			if b, err = appendFinite(append(b, `,"weight":`...), f.Weight); err != nil {
				return b, err
			}
			b = append(b, `,"group":`...)
			b = jsonenc.AppendString(b, f.Group)
			if b, err = appendFinite(append(b, `,"contribution":`...), f.Contribution); err != nil {
				return b, err
			}
			b = appendMessage(append(b, `,"text":`...), f.Text)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	sc := &r.Scenario
	if b, err = appendFinite(append(b, `,"scenario":{"support":`...), sc.Support); err != nil {
		return b, err
	}
	if b, err = appendFinite(append(b, `,"resistance":`...), sc.Resistance); err != nil {
		return b, err
	}
	if b, err = appendFinite(append(b, `,"last_close":`...), sc.LastClose); err != nil {
		return b, err
	}
	b = appendMessage(append(b, `,"text":`...), sc.Text)
	b = appendMessage(append(b, `,"invalidation":`...), sc.Invalidation)
	b = appendMessage(append(b, `},"summary":`...), r.Summary)
	b = append(b, `,"model_version":`...)
	b = jsonenc.AppendString(b, r.ModelVersion)
	return append(b, '}'), nil
}

// appendFinite is jsonenc.AppendFloat, refusing what JSON cannot carry.
func appendFinite(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, fmt.Errorf("json: unsupported value: %v", f)
	}
	return jsonenc.AppendFloat(b, f), nil
}

// appendMessage is a Message as Marshal writes it: its args (omitted when
// empty) in key order.
func appendMessage(b []byte, m analytics.Message) []byte {
	b = append(b, `{"key":`...)
	b = jsonenc.AppendString(b, m.Key)
	if len(m.Args) > 0 {
		b = append(b, `,"args":{`...)
		for i, a := range m.Args.InOrder() {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(b, a.Name)
			b = append(b, ':')
			b = jsonenc.AppendString(b, a.Value)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}
