package analytics

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

// candlesFromBytes turns fuzz input into candles: each 8 bytes are one bar
// (price move, wick sizes, volume, and a flag byte that forces flat bars,
// zero volume or huge jumps), so the fuzzer explores degenerate data.
func candlesFromBytes(data []byte) []domain.Candle {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var out []domain.Candle
	price := 100.0
	for i := 0; i+8 <= len(data) && len(out) < 600; i += 8 {
		b := data[i : i+8]
		move := float64(int16(binary.LittleEndian.Uint16(b[0:2]))) / 32768 * 0.2 // ±20%
		open := price
		switch b[7] % 8 {
		case 0: // flat bar
			move = 0
		case 1: // crash or spike
			move *= 4
		}
		price = math.Max(open*math.Exp(move), 1e-6)
		up, down := float64(b[2])/255*0.05, float64(b[3])/255*0.05
		vol := float64(binary.LittleEndian.Uint16(b[4:6]))
		if b[7]%8 == 2 {
			vol = 0
		}
		hi, lo := math.Max(open, price)*(1+up), math.Min(open, price)*(1-down)
		if b[7]%8 == 0 {
			hi, lo = open, open
		}
		out = append(out, domain.Candle{Time: t0.Add(time.Duration(len(out)) * time.Hour),
			Open: open, High: hi, Low: lo, Close: price, Volume: vol})
	}
	return out
}

func FuzzScore(f *testing.F) {
	seed := make([]byte, 8*80)
	for i := range seed {
		seed[i] = byte(i * 37)
	}
	f.Add(seed, uint8(0))
	f.Add(make([]byte, 8*70), uint8(1)) // all flat
	f.Add(make([]byte, 8*59), uint8(2)) // too short
	f.Fuzz(func(t *testing.T, data []byte, fundMode uint8) {
		var fund *Fundamentals
		m := domain.Markets[int(fundMode)%3]
		if fundMode&4 != 0 {
			fund = &Fundamentals{FundingRate: ptr(float64(fundMode) / 1e4), PE: ptr(float64(fundMode) - 100),
				PolicyRateDiff: ptr(float64(fundMode) / 50), OpenInterestChange: ptr(0.05)}
		}
		in := Input{Market: m, Symbol: "FUZZ", Candles: candlesFromBytes(data), Fundamentals: fund, PrevVerdict: VerdictGrowth}
		res, err := Score(in)
		if err != nil {
			if domain.ErrorCode(err) != domain.EINVALID {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
		for _, s := range []int{res.TechnicalScore, res.OverallScore} {
			if s < -100 || s > 100 {
				t.Fatalf("score %d out of range", s)
			}
		}
		if res.FundamentalScore != nil && (*res.FundamentalScore < -100 || *res.FundamentalScore > 100) {
			t.Fatalf("fundamental score %d out of range", *res.FundamentalScore)
		}
		var total float64
		for _, f := range res.Factors {
			if math.IsNaN(f.Weight) || f.Weight < 0 || f.Weight > 1 || math.IsNaN(f.Contribution) {
				t.Fatalf("factor %s: weight %v contribution %v", f.Name, f.Weight, f.Contribution)
			}
			total += f.Weight
		}
		if math.Abs(total-1) > 1e-9 {
			t.Fatalf("weights sum to %v", total)
		}
		sc := res.Scenario
		for _, v := range []float64{sc.Support, sc.Resistance, sc.LastClose} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("scenario has a non-finite value: %+v", sc)
			}
		}
		// NaN anywhere in the result would also fail here.
		if _, err := json.Marshal(res.Localize("ja")); err != nil {
			t.Fatalf("report does not marshal: %v", err)
		}
	})
}
