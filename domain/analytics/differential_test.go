package analytics

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

// The differential test of the scorer: any change to how Score computes
// (an indicator kept incrementally, a buffer reused, an array not built)
// must give every asset the same answer as the scorer the digests were
// written with, to the last bit: every vote, value, text argument, weight,
// score, verdict and the scenario. The published vectors check a few
// dozen hand-made cases; this checks hundreds of random ones, of every
// length, price scale and shape the engine meets (flat bars, no volume,
// gaps, crashes), in every market.

var updateDigests = flag.Bool("update-digests", false, "rewrite testdata/score_digests.txt from the current scorer (only for a new model version)")

const digestsFile = "testdata/score_digests.txt"

// differentialCases is how many random assets the test scores.
const differentialCases = 400

// randomInput is case i: a random length from MinCandles to 700, a
// random starting price from 1e-6 to 1e5, a random drift and volatility,
// and now and then flat bars, bars without volume, a jump, or
// fundamentals of its market.
func randomInput(i int) Input {
	r := rand.New(rand.NewPCG(uint64(i)+1, 0x5eed))
	n := MinCandles + r.IntN(700-MinCandles+1)
	markets := []domain.Market{domain.Crypto, domain.Stocks, domain.Forex}
	m := markets[r.IntN(len(markets))]
	price := math.Pow(10, -6+11*r.Float64())
	drift, vol := (r.Float64()-0.5)*0.004, 0.001+r.Float64()*0.05
	flat, noVolume, jump := r.IntN(4) == 0, r.IntN(5) == 0, r.IntN(6) == 0
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cs := make([]domain.Candle, n)
	for k := range cs {
		open := price
		switch {
		case flat && r.IntN(8) == 0:
			// a bar without a trade: every price the last close
		case jump && k == n/2:
			price *= 0.5 + r.Float64()
		default:
			price *= math.Exp(drift + r.NormFloat64()*vol)
		}
		hi := math.Max(open, price) * (1 + r.Float64()*vol/2)
		lo := math.Min(open, price) * (1 - r.Float64()*vol/2)
		if open == price {
			hi, lo = price, price
		}
		v := 1000 + r.Float64()*100000
		if noVolume {
			v = 0
		}
		cs[k] = domain.Candle{Time: t0.Add(time.Duration(k) * time.Hour), Open: open, High: hi, Low: lo, Close: price, Volume: v}
	}
	in := Input{Market: m, Symbol: fmt.Sprintf("CASE_%d", i), Candles: cs}
	verdicts := []Verdict{"", VerdictGrowth, VerdictNeutral, VerdictDecline}
	in.PrevVerdict = verdicts[r.IntN(len(verdicts))]
	if r.IntN(2) == 0 {
		f := &Fundamentals{}
		switch m {
		case domain.Crypto:
			f.FundingRate, f.OpenInterestChange, f.VolumeToMarketCap = ptr((r.Float64()-0.5)*0.002), ptr((r.Float64()-0.5)*0.2), ptr(r.Float64()*0.3)
		case domain.Stocks:
			f.PE, f.RevenueGrowth, f.NetMargin, f.DebtToEquity = ptr(r.Float64()*60-5), ptr((r.Float64()-0.3)*0.6), ptr((r.Float64()-0.3)*0.5), ptr(r.Float64()*3)
		case domain.Forex:
			f.PolicyRateDiff, f.InflationDiff = ptr((r.Float64()-0.5)*6), ptr((r.Float64()-0.5)*4)
		}
		in.Fundamentals = f
	}
	return in
}

// scoreDigest is the SHA-256 of case i's result as JSON (every field, in
// every language its texts render to), or of its error.
func scoreDigest(t *testing.T, i int) (digest string, scored bool) {
	t.Helper()
	res, err := Score(randomInput(i))
	h := sha256.New()
	if err != nil {
		fmt.Fprintf(h, "error: %v", err)
		return hex.EncodeToString(h.Sum(nil)), false
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	h.Write(b)
	for _, lang := range Langs {
		b, err := json.Marshal(res.Localize(lang))
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), true
}

func TestScoreMatchesTheRecordedScorer(t *testing.T) {
	var got bytes.Buffer
	failed := 0
	for i := range differentialCases {
		d, ok := scoreDigest(t, i)
		if !ok {
			failed++
		}
		fmt.Fprintf(&got, "%d %s\n", i, d)
	}
	if failed > 0 {
		t.Errorf("%d of %d random cases did not score: the cases must be valid assets", failed, differentialCases)
	}
	if *updateDigests {
		if err := os.WriteFile(digestsFile, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(digestsFile)
	if err != nil {
		t.Fatalf("%v (go test ./domain/analytics -run TestScoreMatchesTheRecordedScorer -update-digests writes it)", err)
	}
	if bytes.Equal(got.Bytes(), want) {
		return
	}
	g, w := bufio.NewScanner(&got), bufio.NewScanner(bytes.NewReader(want))
	bad := 0
	for g.Scan() {
		if !w.Scan() || g.Text() != w.Text() {
			if bad++; bad <= 10 {
				t.Errorf("case %q differs from the recorded scorer's answer (%q)", g.Text(), w.Text())
			}
		}
	}
	t.Fatalf("%d of %d cases differ from %s: the scorer's answers changed", max(bad, 1), differentialCases, digestsFile)
}

// TestScoreOfBarsIsScoreOfCandles scores every differential case from its
// candles by column (Input.Bars, as the scoring worker's cache hands them
// out) and checks the answer is the candles' to the last byte, and that
// scoring wrote nothing into the columns: the cache shares them between
// runs and readers.
func TestScoreOfBarsIsScoreOfCandles(t *testing.T) {
	for i := range differentialCases {
		in := randomInput(i)
		want, werr := Score(in)
		bars := domain.BarsOf(in.Candles)
		kept := domain.BarsOf(in.Candles)
		in.Candles = nil
		in.Bars = bars
		got, gerr := Score(in)
		if fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Fatalf("case %d: error %v from bars, %v from candles", i, gerr, werr)
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if !bytes.Equal(g, w) {
			t.Fatalf("case %d: the result from bars differs from the candles'", i)
		}
		for name, pair := range map[string][2][]float64{"open": {bars.Open, kept.Open}, "high": {bars.High, kept.High},
			"low": {bars.Low, kept.Low}, "close": {bars.Close, kept.Close}, "volume": {bars.Volume, kept.Volume}} {
			for k := range pair[0] {
				if math.Float64bits(pair[0][k]) != math.Float64bits(pair[1][k]) {
					t.Fatalf("case %d: scoring wrote into the bars' %s at %d", i, name, k)
				}
			}
		}
		for k := range bars.Times {
			if bars.Times[k] != kept.Times[k] {
				t.Fatalf("case %d: scoring wrote into the bars' times at %d", i, k)
			}
		}
	}
}
