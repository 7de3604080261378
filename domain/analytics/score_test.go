package analytics

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/marketscreener/market/domain"
)

func TestScoreRejectsTooFewCandles(t *testing.T) {
	t.Parallel()
	_, err := Score(Input{Market: domain.Crypto, Symbol: "BTC_USDT", Candles: walk(MinCandles-1, 1, 0, 0.01)})
	if domain.ErrorCode(err) != domain.EINVALID || !strings.HasPrefix(err.Error(), "analytics: ") {
		t.Fatalf("err = %v, want an EINVALID error prefixed analytics:", err)
	}
}

func TestScoreRejectsInvalidCandles(t *testing.T) {
	t.Parallel()
	cs := walk(100, 1, 0, 0.01)
	cs[50].Close = math.NaN()
	if _, err := Score(Input{Market: domain.Crypto, Candles: cs}); domain.ErrorCode(err) != domain.EINVALID {
		t.Fatalf("err = %v, want EINVALID", err)
	}
}

func TestScoreFollowsTheTrend(t *testing.T) {
	t.Parallel()
	up, err := Score(Input{Market: domain.Crypto, Symbol: "UP", Candles: walk(400, 3, 0.01, 0.005)})
	if err != nil {
		t.Fatal(err)
	}
	down, err := Score(Input{Market: domain.Crypto, Symbol: "DOWN", Candles: walk(400, 3, -0.01, 0.005)})
	if err != nil {
		t.Fatal(err)
	}
	if up.TechnicalScore < 20 || up.Verdict != VerdictGrowth {
		t.Errorf("steady uptrend: score %d verdict %s, want ≥ 20 growth", up.TechnicalScore, up.Verdict)
	}
	if down.TechnicalScore > -20 || down.Verdict != VerdictDecline {
		t.Errorf("steady downtrend: score %d verdict %s, want ≤ -20 decline", down.TechnicalScore, down.Verdict)
	}
}

func TestScoreWeightsAndContributions(t *testing.T) {
	t.Parallel()
	res, err := Score(Input{Market: domain.Crypto, Symbol: "BTC_USDT", Candles: walk(500, 5, 0.001, 0.01),
		Fundamentals: &Fundamentals{FundingRate: ptr(-0.001), VolumeToMarketCap: ptr(0.05)}})
	if err != nil {
		t.Fatal(err)
	}
	var total, techW, fundW, contrib float64
	groups := map[string]int{}
	for _, f := range res.Factors {
		total += f.Weight
		contrib += f.Contribution
		groups[f.Group]++
		if f.Group == GroupFundamental {
			fundW += f.Weight
		} else {
			techW += f.Weight
		}
		if f.Contribution != f.Sentiment.sign()*f.Weight {
			t.Errorf("%s: contribution %v, weight %v, sentiment %s", f.Name, f.Contribution, f.Weight, f.Sentiment)
		}
	}
	if math.Abs(total-1) > 1e-9 || math.Abs(techW-TechnicalShare) > 1e-9 || math.Abs(fundW-FundamentalShare) > 1e-9 {
		t.Errorf("weights: total %v, technical %v, fundamental %v", total, techW, fundW)
	}
	if groups[GroupMA] != 15 || groups[GroupOscillator] != 11 || groups[GroupVolume] != 2 || groups[GroupFundamental] != 2 {
		t.Errorf("factor groups = %v, want 15 MA, 11 oscillator votes, 2 volume, 2 fundamental", groups)
	}
	// Funding −0.1% is bullish, 5% turnover neutral: weights 0.4 vs 0.25.
	if res.FundamentalScore == nil || *res.FundamentalScore != 62 {
		t.Errorf("fundamental score = %v, want 62", res.FundamentalScore)
	}
	want := int(math.Round(0.7*float64(res.TechnicalScore) + 0.3*62))
	if res.OverallScore != want {
		t.Errorf("overall = %d, want round(0.7·%d + 0.3·62) = %d", res.OverallScore, res.TechnicalScore, want)
	}
	if math.Abs(100*contrib-float64(res.OverallScore)) > 1.5 {
		t.Errorf("Σ contributions ×100 = %v, overall %d", 100*contrib, res.OverallScore)
	}
}

// The technical score without patterns, volume or fundamentals is exactly
// TradingView's rating: (MA mean + oscillator mean) / 2 × 100.
func TestTechnicalScoreIsTradingViewRating(t *testing.T) {
	t.Parallel()
	cs := walk(400, 8, 0.002, 0.01)
	for i := range cs {
		cs[i].Volume = 0 // no volume factors
	}
	res, err := Score(Input{Market: domain.Forex, Symbol: "EUR_USD", Candles: cs})
	if err != nil {
		t.Fatal(err)
	}
	var ma, osc, nMA, nOsc float64
	for _, f := range res.Factors {
		switch f.Group {
		case GroupMA:
			ma += f.Sentiment.sign()
			nMA++
		case GroupOscillator:
			osc += f.Sentiment.sign()
			nOsc++
		case GroupPattern:
			t.Skip("a pattern on the last bar changes the weights")
		default:
			t.Errorf("unexpected factor %s", f.Name)
		}
	}
	if nMA != 14 { // no VWMA without volume
		t.Errorf("%v MA votes, want 14", nMA)
	}
	want := int(math.Round(100 * (ma/nMA + osc/nOsc) / 2))
	if res.TechnicalScore != want {
		t.Errorf("technical score %d, TradingView rating %d", res.TechnicalScore, want)
	}
	if res.FundamentalScore != nil || res.OverallScore != res.TechnicalScore {
		t.Errorf("no fundamentals: fundamental %v, overall %d", res.FundamentalScore, res.OverallScore)
	}
}

// With fewer than 200 candles the long averages are missing and left out.
func TestShortHistoryLeavesVotesOut(t *testing.T) {
	t.Parallel()
	res, err := Score(Input{Market: domain.Crypto, Symbol: "NEW_USDT", Candles: walk(MinCandles, 2, 0, 0.01)})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range res.Factors {
		names[f.Name] = true
	}
	for _, gone := range []string{"sma_100", "sma_200", "ema_100", "ema_200"} {
		if names[gone] {
			t.Errorf("%s present with %d candles", gone, MinCandles)
		}
	}
	for _, there := range []string{"sma_50", "ema_50", "ichimoku_9_26_52", "macd_12_26_9", "adx_14", "rsi_14"} {
		if !names[there] {
			t.Errorf("%s missing with %d candles", there, MinCandles)
		}
	}
}

func TestResultJSON(t *testing.T) {
	t.Parallel()
	res, err := Score(Input{Market: domain.Stocks, Symbol: "AAPL", Candles: walk(300, 4, 0.001, 0.01)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if Render("es", back.Summary) != Render("es", res.Summary) || len(back.Factors) != len(res.Factors) {
		t.Error("stored result does not render the same after a JSON round trip")
	}
	rep, err := json.Marshal(res.Localize("en"))
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"technical_score":`, `"fundamental_score":null`, `"overall_score":`, `"verdict":`,
		`"summary":`, `"factors":[`, `"name":`, `"value":`, `"sentiment":`, `"weight":`, `"explanation":`,
		`"scenario":{`, `"support":`, `"resistance":`, `"last_close":`, `"scenario_text":`, `"invalidation_text":`} {
		if !strings.Contains(string(rep), field) {
			t.Errorf("report JSON lacks %s", field)
		}
	}
}

func TestHysteresisThroughScore(t *testing.T) {
	t.Parallel()
	cs := walk(300, 12, 0, 0.01)
	res, err := Score(Input{Market: domain.Crypto, Candles: cs})
	if err != nil {
		t.Fatal(err)
	}
	for _, prev := range []Verdict{"", VerdictGrowth, VerdictDecline} {
		r, _ := Score(Input{Market: domain.Crypto, Candles: cs, PrevVerdict: prev})
		if want := DecideVerdict(prev, res.OverallScore); r.Verdict != want {
			t.Errorf("prev %q: verdict %s, want %s", prev, r.Verdict, want)
		}
	}
}
