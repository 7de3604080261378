package analytics

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
)

// The published test vectors (docs/vectors/<version>/, format in its
// README.md): the inputs are built here, the expectations are what the
// engine answers. TestVectors checks that the files are exactly what this
// file and the engine produce, then replays every case from the files
// alone, as a client's reimplementation would.

var update = flag.Bool("update", false, "write the vectors of the current model version; refuses to change a published expectation")

const vectorsRoot = "../../docs/vectors"

func vectorsDir() string { return filepath.Join(vectorsRoot, CurrentVersion().Name) }

func TestVectors(t *testing.T) {
	files := generateVectors(t)
	dir := vectorsDir()
	if *update {
		refuseChangedExpectations(t, dir, files)
		writeVectors(t, dir, files)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%v (run go test ./domain/analytics -run TestVectors -update)", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s/%s differs from what the engine produces (go test ./domain/analytics -run TestVectors -update writes it, "+
				"and refuses when a published expectation would change: that needs a new model version)", dir, name)
		}
	}
	onDisk, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	top, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, p := range append(onDisk, top...) {
		rel, _ := filepath.Rel(dir, p)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && files[rel] == nil && rel != "README.md" {
			t.Errorf("%s is not a vector of this version (remove it)", p)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "README.md")); err != nil {
		t.Errorf("the vectors of %s have no README.md: %v", CurrentVersion().Name, err)
	}
	t.Run("replay", func(t *testing.T) { replayVectors(t, dir) })
}

// refuseChangedExpectations fails when the engine no longer answers what
// the published vectors of the current version expect: regenerating them
// would change a published version's behaviour.
func refuseChangedExpectations(t *testing.T, dir string, generated map[string][]byte) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(dir, "methodology.json")); err == nil {
		var m Method
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m.Fingerprint != CurrentVersion().Fingerprint {
			t.Fatalf("%s was published with fingerprint %s; the current version's is %s: add a new version instead of rewriting it",
				dir, m.Fingerprint, CurrentVersion().Fingerprint)
		}
	}
	diffs := replayVectors(t, dir)
	for name, outputs := range tableOutputs {
		diffs = append(diffs, changedRows(t, filepath.Join(dir, name), generated[name], outputs)...)
	}
	if len(diffs) > 0 {
		t.Fatalf("published expectations changed (%s). "+"The engine no longer reproduces the published vectors of %s: a rule changed, so add a model version (analytics.Versions) and write its vectors",
			strings.Join(diffs, ", "), CurrentVersion().Name)
	}
}

// tableOutputs names, for each table of rule edges, the fields of a row
// that are the engine's answer; the others are its inputs.
var tableOutputs = map[string][]string{
	"votes.json":        {"vote"},
	"verdict.json":      {"verdict"},
	"fundamentals.json": {"factors", "score"},
}

// changedRows lists the rows of the published table at path whose inputs
// are still in the regenerated table with another answer.
func changedRows(t *testing.T, path string, regenerated []byte, outputs []string) []string {
	t.Helper()
	published, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	split := func(b []byte) map[string]string {
		var rows []map[string]any
		if err := json.Unmarshal(b, &rows); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out := map[string]string{}
		for _, r := range rows {
			answer := map[string]any{}
			for _, k := range outputs {
				answer[k] = r[k]
				delete(r, k)
			}
			out[string(encodeJSON(t, r))] = string(encodeJSON(t, answer))
		}
		return out
	}
	var diffs []string
	current := split(regenerated)
	for in, answer := range split(published) {
		if a, ok := current[in]; ok && a != answer {
			diffs = append(diffs, filepath.Base(path)+" "+strings.Join(strings.Fields(in), " "))
		}
	}
	return diffs
}

func writeVectors(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(dir, "cases")); err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// encodeJSON is the vectors' JSON: indented, no HTML escaping, a final newline.
func encodeJSON(t testing.TB, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// generateVectors builds every file of the current version's vectors.
func generateVectors(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{
		"methodology.json":  encodeJSON(t, CurrentMethod()),
		"votes.json":        encodeJSON(t, voteVectors()),
		"verdict.json":      encodeJSON(t, verdictVectors()),
		"fundamentals.json": encodeJSON(t, fundamentalVectors()),
	}
	for _, c := range vectorCases(t) {
		cf := caseFile{Description: c.Description, Market: string(c.Market), Symbol: c.Symbol, Style: string(c.Style),
			Timeframe: string(c.Style.Timeframe()), Candles: c.Name + ".csv", PrevVerdict: string(c.PrevVerdict),
			Fundamentals: c.Fundamentals}
		res, err := Score(c.input())
		if err != nil {
			cf.Error = string(domain.ErrorCode(err))
		} else {
			e := expectationOf(res)
			cf.Expected = &e
		}
		files["cases/"+c.Name+".json"] = encodeJSON(t, cf)
		files["cases/"+c.Name+".csv"] = encodeCSV(t, c.Candles)
	}
	return files
}

// caseFile is cases/<name>.json.
type caseFile struct {
	Description  string        `json:"description"`
	Market       string        `json:"market"`
	Symbol       string        `json:"symbol"`
	Style        string        `json:"style"`
	Timeframe    string        `json:"timeframe"`
	Candles      string        `json:"candles"`
	PrevVerdict  string        `json:"prev_verdict"`
	Fundamentals *Fundamentals `json:"fundamentals"`
	Error        string        `json:"error,omitempty"`
	Expected     *expectation  `json:"expected,omitempty"`
}

type expectation struct {
	ModelVersion     string           `json:"model_version"`
	TechnicalScore   int              `json:"technical_score"`
	FundamentalScore *int             `json:"fundamental_score"`
	OverallScore     int              `json:"overall_score"`
	Verdict          Verdict          `json:"verdict"`
	Factors          []expectedFactor `json:"factors"`
	Missing          []string         `json:"missing"`
	Support          float64          `json:"support"`
	Resistance       float64          `json:"resistance"`
}

type expectedFactor struct {
	Name      string    `json:"name"`
	Group     string    `json:"group"`
	Sentiment Sentiment `json:"sentiment"`
	Weight    float64   `json:"weight"`
}

// expectationOf is what a vector pins of a result: everything but the
// texts and the formatted readings (presentation, not method).
func expectationOf(r Result) expectation {
	e := expectation{ModelVersion: r.ModelVersion, TechnicalScore: r.TechnicalScore, FundamentalScore: r.FundamentalScore,
		OverallScore: r.OverallScore, Verdict: r.Verdict, Factors: []expectedFactor{}, Missing: []string{},
		Support: r.Scenario.Support, Resistance: r.Scenario.Resistance}
	cast := map[string]bool{}
	for _, f := range r.Factors {
		e.Factors = append(e.Factors, expectedFactor{Name: f.Name, Group: f.Group, Sentiment: f.Sentiment, Weight: f.Weight})
		cast[f.Name] = true
	}
	for _, v := range voteRules() {
		if v.Group != GroupPattern && !cast[v.Factor] {
			e.Missing = append(e.Missing, v.Factor)
		}
	}
	return e
}

var csvHeader = []string{"open_time", "open", "high", "low", "close", "volume"}

func encodeCSV(t testing.TB, cs []domain.Candle) []byte {
	t.Helper()
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write(csvHeader)
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for _, c := range cs {
		_ = w.Write([]string{c.Time.UTC().Format(time.RFC3339), g(c.Open), g(c.High), g(c.Low), g(c.Close), g(c.Volume)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func decodeCSV(b []byte) ([]domain.Candle, error) {
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 || !slices.Equal(rows[0], csvHeader) {
		return nil, fmt.Errorf("the header is not %v", csvHeader)
	}
	out := make([]domain.Candle, 0, len(rows)-1)
	for _, r := range rows[1:] {
		at, err := time.Parse(time.RFC3339, r[0])
		if err != nil {
			return nil, err
		}
		var v [5]float64
		for i := range v {
			if v[i], err = strconv.ParseFloat(r[i+1], 64); err != nil {
				return nil, err
			}
		}
		out = append(out, domain.Candle{Time: at, Open: v[0], High: v[1], Low: v[2], Close: v[3], Volume: v[4]})
	}
	return out, nil
}

// replayVectors scores every case of dir from its files alone and
// reports the cases whose answer differs from their expectation.
func replayVectors(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "cases", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var diffs []string
	for _, p := range names {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var cf caseFile
		if err := json.Unmarshal(b, &cf); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "cases", cf.Candles))
		if err != nil {
			t.Fatal(err)
		}
		candles, err := decodeCSV(raw)
		if err != nil {
			t.Fatalf("%s: %v", cf.Candles, err)
		}
		if st, ok := ParseStyle(cf.Style); !ok || string(st.Timeframe()) != cf.Timeframe {
			t.Errorf("%s: style %q does not score %q candles", p, cf.Style, cf.Timeframe)
		}
		res, err := Score(Input{Market: domain.Market(cf.Market), Symbol: cf.Symbol, Candles: candles,
			Fundamentals: cf.Fundamentals, PrevVerdict: Verdict(cf.PrevVerdict)})
		var got caseFile
		if err != nil {
			got.Error = string(domain.ErrorCode(err))
		} else {
			e := expectationOf(res)
			got.Expected = &e
		}
		if got.Error != cf.Error || !bytes.Equal(encodeJSON(t, got.Expected), encodeJSON(t, cf.Expected)) {
			diffs = append(diffs, filepath.Base(p))
			if !*update {
				t.Errorf("%s: the engine answers %s%s, the vector expects %s%s", p, got.Error, encodeJSON(t, got.Expected), cf.Error, encodeJSON(t, cf.Expected))
			}
		}
	}
	if len(names) == 0 && !*update {
		t.Errorf("no cases in %s", dir)
	}
	return diffs
}

// vectorCase is one OHLCV case.
type vectorCase struct {
	Name, Description string
	Market            domain.Market
	Symbol            string
	Style             Style
	PrevVerdict       Verdict
	Fundamentals      *Fundamentals
	Candles           []domain.Candle
}

func (c vectorCase) input() Input {
	return Input{Market: c.Market, Symbol: c.Symbol, Candles: c.Candles, Fundamentals: c.Fundamentals, PrevVerdict: c.PrevVerdict}
}

// series builds candles of a style's timeframe from {open, high, low,
// close, volume} rows.
func series(style Style, rows [][5]float64) []domain.Candle {
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	step := style.Timeframe().Duration()
	out := make([]domain.Candle, len(rows))
	for i, r := range rows {
		out[i] = domain.Candle{Time: t0.Add(time.Duration(i) * step), Open: r[0], High: r[1], Low: r[2], Close: r[3], Volume: r[4]}
	}
	return out
}

// walkRows is walk's candles as rows, scaled so the last close is last.
func walkRows(n int, seed uint64, drift, vol, last float64) [][5]float64 {
	cs := walk(n, seed, drift, vol)
	k := last / cs[n-1].Close
	out := make([][5]float64, n)
	for i, c := range cs {
		out[i] = [5]float64{c.Open * k, c.High * k, c.Low * k, c.Close * k, math.Round(c.Volume)}
	}
	return out
}

// withPattern ends a random walk with five trending bars and a pattern's
// candles (each {open, high, low, close} at volume 1500).
func withPattern(seed uint64, up bool, pattern ...[4]float64) [][5]float64 {
	trend := [][4]float64{{110, 111, 107, 108}, {108, 109, 105, 106}, {106, 107, 103, 104}, {104, 105, 101, 102}, {102, 103, 99, 100}}
	start := 110.0
	if up {
		trend = [][4]float64{{90, 93, 89, 92}, {92, 95, 91, 94}, {94, 97, 93, 96}, {96, 99, 95, 98}, {98, 101, 97, 100}}
		start = 90
	}
	rows := walkRows(RecommendedCandles-len(trend)-len(pattern), seed, 0, 0.01, start)
	for _, p := range append(trend, pattern...) {
		rows = append(rows, [5]float64{p[0], p[1], p[2], p[3], 1500})
	}
	return rows
}

// closingAtExtremes is a walk ending in bars that each close at their low
// (down) or high: the raw stochastic is 0 (100) on each, so %K = %D.
func closingAtExtremes(seed uint64, down bool) [][5]float64 {
	rows := walkRows(RecommendedCandles-8, seed, 0, 0.01, 100)
	price := 100.0
	for range 8 {
		if down {
			rows = append(rows, [5]float64{price, price + 0.5, price - 2, price - 2, 1200})
			price -= 2
		} else {
			rows = append(rows, [5]float64{price, price + 2, price - 0.5, price + 2, 1200})
			price += 2
		}
	}
	return rows
}

// withVolume sets the last candle's volume to k × the mean of the ones
// before it and its close above (up) or below the previous close.
func withVolume(rows [][5]float64, k float64, up bool) [][5]float64 {
	n := len(rows)
	for i := n - 1 - volumeAvgBars; i < n-1; i++ {
		rows[i][4] = 1000
	}
	rows[n-1][4] = k * 1000
	prev := rows[n-2][3]
	last := prev * 1.01
	if !up {
		last = prev * 0.99
	}
	rows[n-1] = [5]float64{prev, math.Max(prev, last) * 1.002, math.Min(prev, last) * 0.998, last, rows[n-1][4]}
	return rows
}

func flatRows(n int, volume float64) [][5]float64 {
	out := make([][5]float64, n)
	for i := range out {
		out[i] = [5]float64{100, 100, 100, 100, volume}
	}
	return out
}

// handmadeCases are the cases built for one edge each.
func handmadeCases() []vectorCase {
	c := func(name, desc string, style Style, rows [][5]float64) vectorCase {
		return vectorCase{Name: name, Description: desc, Market: domain.Crypto, Symbol: "VEC_USDT", Style: style, Candles: series(style, rows)}
	}
	gaps := series(Swing, walkRows(RecommendedCandles, 11, 0.001, 0.02, 100))
	for i := range gaps { // every tenth candle missing from the feed, and a weekend-sized hole
		gaps[i].Time = gaps[i].Time.Add(time.Duration(i/10) * 4 * time.Hour)
		if i > 200 {
			gaps[i].Time = gaps[i].Time.Add(48 * time.Hour)
		}
	}
	priceGaps := walkRows(RecommendedCandles, 12, 0, 0.01, 100)
	for i := 100; i < len(priceGaps); i += 40 { // an opening gap of ±8%
		k := 1.08
		if i%80 == 0 {
			k = 0.92
		}
		for j := i; j < len(priceGaps); j++ {
			for f := range 4 {
				priceGaps[j][f] *= k
			}
		}
		priceGaps[i][2] = math.Min(priceGaps[i][2], priceGaps[i-1][3]*math.Min(1, k)) // the gap bar's range covers its open
		priceGaps[i][0] = priceGaps[i-1][3]
		priceGaps[i][1] = math.Max(priceGaps[i][1], priceGaps[i][0])
		priceGaps[i][2] = math.Min(priceGaps[i][2], priceGaps[i][0])
	}
	cases := []vectorCase{
		c("below_minimum_history", fmt.Sprintf("%d candles, one fewer than the minimum: not scored (error EINVALID)", MinCandles-1),
			Swing, walkRows(MinCandles-1, 1, 0, 0.01, 100)),
		c("minimum_history", fmt.Sprintf("exactly %d candles: the averages longer than the history cast no vote and are left out of the MA group", MinCandles),
			Swing, walkRows(MinCandles, 2, 0.002, 0.01, 100)),
		c("short_history", "199 candles: SMA 200 and EMA 200 are missing, SMA/EMA 100 vote", Intraday, walkRows(199, 3, 0.001, 0.01, 100)),
		c("flat_series", "every candle open = high = low = close: the averages equal the close (neutral), ranges are empty (stochastics and %R missing)",
			Swing, flatRows(RecommendedCandles, 1000)),
		c("flat_series_no_volume", "a flat series with zero volume (a feed without volume): VWMA and both volume factors are missing",
			Swing, flatRows(RecommendedCandles, 0)),
		c("stoch_k_equals_d_oversold", "eight bars each closing at its low: %K = %D = 0, so the stochastic's buy (%K > %D) does not fire",
			Swing, closingAtExtremes(21, true)),
		c("stoch_k_equals_d_overbought", "eight bars each closing at its high: %K = %D = 100, so the stochastic's sell (%K < %D) does not fire",
			Scalp, closingAtExtremes(22, false)),
		{Name: "time_gaps", Description: "candles missing from the feed (every tenth bar and a two-day hole): the method reads the candles in order and ignores their times",
			Market: domain.Crypto, Symbol: "VEC_USDT", Style: Swing, Candles: gaps},
		c("price_gaps", "opening gaps of ±8% every 40 bars", Position, priceGaps),
		c("volume_spike_up", fmt.Sprintf("the last volume %g× the mean of the %d before it, on a rising close", 3.0, volumeAvgBars),
			Swing, withVolume(walkRows(RecommendedCandles, 8, 0, 0.01, 100), 3, true)),
		c("volume_spike_down", "a volume spike on a falling close", Intraday, withVolume(walkRows(RecommendedCandles, 9, 0, 0.01, 100), 3, false)),
		c("volume_at_spike_threshold", fmt.Sprintf("the last volume exactly %g× the mean: confirms", volumeSpikeMin),
			Swing, withVolume(walkRows(RecommendedCandles, 10, 0, 0.01, 100), volumeSpikeMin, true)),
		c("strong_uptrend", "a steady rise: most votes buy", Swing, walkRows(RecommendedCandles, 5, 0.01, 0.01, 100)),
		c("strong_downtrend", "a steady fall: most votes sell", Swing, walkRows(RecommendedCandles, 6, -0.01, 0.01, 100)),
		c("pattern_bullish_engulfing", "", Swing, withPattern(31, false, [4]float64{100, 100.5, 98.5, 99}, [4]float64{98.8, 101.5, 98.5, 101.2})),
		c("pattern_bearish_engulfing", "", Swing, withPattern(32, true, [4]float64{100, 101.5, 99.5, 101}, [4]float64{101.2, 101.5, 98.5, 99.5})),
		c("pattern_hammer", "", Swing, withPattern(33, false, [4]float64{99.5, 100.1, 97.5, 100})),
		c("pattern_hanging_man", "the hammer's candle after a rise: no pattern", Swing, withPattern(33, true, [4]float64{99.5, 100.1, 97.5, 100})),
		c("pattern_shooting_star", "", Swing, withPattern(34, true, [4]float64{100.5, 103, 99.9, 100})),
		c("pattern_doji", "", Swing, withPattern(35, true, [4]float64{100, 102, 98, 100.1})),
		c("pattern_morning_star", "", Swing, withPattern(36, false, [4]float64{100, 100.5, 95, 95.5}, [4]float64{95.2, 95.8, 94.5, 95}, [4]float64{95.5, 99, 95.3, 98.8})),
		c("pattern_evening_star", "", Swing, withPattern(37, true, [4]float64{100, 105, 99.8, 104.5}, [4]float64{104.8, 105.5, 104.2, 105}, [4]float64{104.5, 104.7, 101, 101.2})),
		c("pattern_three_white_soldiers", "", Swing, withPattern(38, false, [4]float64{100, 102.2, 99.8, 102}, [4]float64{101, 104.3, 100.9, 104}, [4]float64{103, 106.2, 102.9, 106})),
		c("pattern_three_black_crows", "", Swing, withPattern(39, true, [4]float64{100, 100.2, 97.8, 98}, [4]float64{99, 99.1, 95.8, 96}, [4]float64{97, 97.1, 93.7, 94})),
		c("equal_bodies_do_not_engulf", "an engulfing shape with equal bodies: no pattern", Swing, withPattern(40, false, [4]float64{100, 100.5, 98.5, 99}, [4]float64{99, 100.5, 98.5, 100})),
	}
	for i := range cases {
		if cases[i].Description == "" {
			cases[i].Description = "a random walk ending in five trending bars and the " + strings.TrimPrefix(cases[i].Name, "pattern_") + " pattern"
		}
	}
	f := func(v float64) *float64 { return &v }
	walkUp := walkRows(RecommendedCandles, 7, 0.0005, 0.01, 100)
	fund := func(name, desc string, m domain.Market, sym string, fu Fundamentals) vectorCase {
		return vectorCase{Name: name, Description: desc, Market: m, Symbol: sym, Style: DefaultStyle, Fundamentals: &fu, Candles: series(DefaultStyle, walkUp)}
	}
	cases = append(cases,
		fund("fundamentals_crypto", "funding at its bearish threshold, open interest up with the price, liquidity high", domain.Crypto, "VEC_USDT",
			Fundamentals{FundingRate: f(fundingHigh), OpenInterestChange: f(0.05), VolumeToMarketCap: f(0.2)}),
		fund("fundamentals_stocks", "a loss-maker (P/E ≤ 0) with strong growth, negative margin and negative equity", domain.Stocks, "VEC",
			Fundamentals{PE: f(-3), RevenueGrowth: f(0.25), NetMargin: f(-0.05), DebtToEquity: f(-1)}),
		fund("fundamentals_stocks_sector", "P/E against the sector's: cheap; the other inputs missing (renormalised)", domain.Stocks, "VEC",
			Fundamentals{PE: f(12), SectorPE: f(30)}),
		fund("fundamentals_forex", "rate differential at +0.5 pp (bullish), inflation differential at +1 pp (bearish)", domain.Forex, "VEC_USD",
			Fundamentals{PolicyRateDiff: f(rateDiffMin), InflationDiff: f(inflationDiff)}),
		fund("fundamentals_other_market", "crypto inputs on a stock: not the market's, so no fundamental score", domain.Stocks, "VEC",
			Fundamentals{FundingRate: f(0.01)}),
	)
	return cases
}

// coverageTargets are the outcomes the cases must show between them.
func coverageTargets() []string {
	var out []string
	for _, v := range voteRules() {
		switch v.Group {
		case GroupPattern:
			out = append(out, v.Factor)
		default:
			for _, s := range []Sentiment{Bullish, Bearish, Neutral} {
				out = append(out, v.Factor+":"+string(s))
			}
			if v.Group != GroupVolume || v.Factor == "volume_confirmation" {
				out = append(out, v.Factor+":missing")
			}
		}
	}
	return append(out, "verdict:growth", "verdict:decline", "verdict:neutral", "verdict:growth_held", "verdict:decline_held",
		"verdict:growth_dropped", "verdict:decline_dropped")
}

// unreachable are targets no OHLCV series can show: a vote whose guard
// is always defined from MinCandles on.
var unreachable = map[string]bool{
	"rsi_14:missing": true, "cci_20:missing": true, "adx_14:missing": true, "awesome_oscillator:missing": true,
	"momentum_10:missing": true, "macd_12_26_9:missing": true, "stoch_rsi_14_14_3_3:missing": true,
	"bull_bear_power_13:missing": true, "sma_10:missing": true, "sma_20:missing": true, "sma_30:missing": true,
	"sma_50:missing": true, "ema_10:missing": true, "ema_20:missing": true, "ema_30:missing": true, "ema_50:missing": true,
	"hma_9:missing": true, "ichimoku_9_26_52:missing": true,
}

// outcomes lists the coverage targets a case shows.
func outcomes(c vectorCase, r Result) []string {
	e := expectationOf(r)
	var out []string
	for _, f := range e.Factors {
		if f.Group == GroupPattern {
			out = append(out, f.Name)
		} else if f.Group != GroupFundamental {
			out = append(out, f.Name+":"+string(f.Sentiment))
		}
	}
	for _, m := range e.Missing {
		out = append(out, m+":missing")
	}
	out = append(out, "verdict:"+string(r.Verdict))
	switch {
	case c.PrevVerdict == VerdictGrowth && r.Verdict == VerdictGrowth && r.OverallScore < GrowthEnter:
		out = append(out, "verdict:growth_held")
	case c.PrevVerdict == VerdictDecline && r.Verdict == VerdictDecline && r.OverallScore > DeclineEnter:
		out = append(out, "verdict:decline_held")
	case c.PrevVerdict == VerdictGrowth && r.Verdict == VerdictNeutral:
		out = append(out, "verdict:growth_dropped")
	case c.PrevVerdict == VerdictDecline && r.Verdict == VerdictNeutral:
		out = append(out, "verdict:decline_dropped")
	}
	return out
}

// vectorCases are the handmade cases plus random walks picked, in a fixed
// order, for each outcome the handmade ones do not show.
func vectorCases(t *testing.T) []vectorCase {
	t.Helper()
	cases := handmadeCases()
	covered := map[string]bool{}
	for _, c := range cases {
		if r, err := Score(c.input()); err == nil {
			for _, o := range outcomes(c, r) {
				covered[o] = true
			}
		}
	}
	styles := []Style{Scalp, Intraday, Swing, Position}
	regimes := [][2]float64{{0, 0.01}, {0.003, 0.01}, {-0.003, 0.01}, {0, 0.03}, {0.001, 0.005}, {-0.001, 0.005}}
	prevs := []Verdict{"", VerdictGrowth, VerdictDecline}
	for seed := uint64(100); seed < 700; seed++ {
		reg := regimes[seed%uint64(len(regimes))]
		st := styles[seed%uint64(len(styles))]
		rows := walkRows(RecommendedCandles, seed, reg[0], reg[1], 100)
		for _, prev := range prevs {
			c := vectorCase{Market: domain.Crypto, Symbol: "VEC_USDT", Style: st, PrevVerdict: prev, Candles: series(st, rows)}
			r, err := Score(c.input())
			if err != nil {
				t.Fatal(err)
			}
			var added []string
			for _, o := range outcomes(c, r) {
				if !covered[o] {
					added = append(added, o)
					covered[o] = true
				}
			}
			if len(added) > 0 {
				c.Name = fmt.Sprintf("walk_%d", seed)
				if prev != "" {
					c.Name += "_after_" + string(prev)
				}
				c.Description = fmt.Sprintf("a random walk (drift %g, volatility %g per bar) picked for: %s", reg[0], reg[1], strings.Join(added, ", "))
				cases = append(cases, c)
			}
		}
	}
	for _, target := range coverageTargets() {
		if !covered[target] && !unreachable[target] {
			t.Errorf("no vector shows %s", target)
		}
	}
	return cases
}

// voteVector is one row of votes.json: a vote rule's readings and its vote
// (null: no vote cast). A null reading is an undefined value (Pine's na).
type voteVector struct {
	Factor string              `json:"factor"`
	Inputs map[string]*float64 `json:"inputs"`
	Vote   *int                `json:"vote"`
}

// voteVectors are the vote rules at their edges.
func voteVectors() []voteVector {
	nan := math.NaN()
	type rule struct {
		factor string
		names  []string
		vote   func(x []float64) (int, bool)
		rows   [][]float64
	}
	rules := []rule{
		{"sma_10", []string{"close", "ma"}, func(x []float64) (int, bool) { return maVote(x[0], x[1]) },
			[][]float64{{101, 100}, {99, 100}, {100, 100}, {100, nan}}},
		{"ichimoku_9_26_52", []string{"close", "conversion", "base", "span_a[26]", "span_b[26]", "span_b"},
			func(x []float64) (int, bool) { return ichimokuVote(x[0], x[1], x[2], x[3], x[4], x[5]) },
			[][]float64{{110, 108, 106, 104, 102, 100}, {90, 92, 94, 96, 98, 100}, {110, 108, 106, 104, 104, 100},
				{108, 108, 106, 104, 102, 100}, {110, 108, 106, 104, 102, nan}, {110, 108, 106, nan, 102, 100}}},
		{"rsi_14", []string{"rsi", "rsi[1]"}, func(x []float64) (int, bool) { return rsiVote(x[0], x[1]) },
			[][]float64{{29, 25}, {30, 25}, {29, 29}, {29, 31}, {71, 75}, {70, 75}, {71, 71}, {50, 40}, {29, nan}, {nan, 25}}},
		{"stoch_14_3_3", []string{"k", "d", "d[1]"}, func(x []float64) (int, bool) { return stochVote(x[0], x[1], x[2]) },
			[][]float64{{15, 10, 12}, {10, 10, 12}, {10, 15, 12}, {20, 10, 12}, {15, 20, 12}, {85, 90, 88}, {90, 90, 88},
				{80, 90, 88}, {85, 80, 88}, {50, 40, 45}, {15, 10, nan}, {nan, 10, 12}}},
		{"cci_20", []string{"cci", "cci[1]"}, func(x []float64) (int, bool) { return cciVote(x[0], x[1]) },
			[][]float64{{-150, -200}, {-100, -200}, {-150, -150}, {150, 200}, {100, 200}, {150, 150}, {0, -50}, {-150, nan}}},
		{"adx_14", []string{"adx", "adx[1]", "plus_di", "minus_di"}, func(x []float64) (int, bool) { return adxVote(x[0], x[1], x[2], x[3]) },
			[][]float64{{25, 24, 30, 10}, {25, 24, 10, 30}, {20, 19, 30, 10}, {25, 25, 30, 10}, {25, 26, 30, 10}, {25, 24, 20, 20}, {nan, 24, 30, 10}}},
		{"awesome_oscillator", []string{"ao", "ao[1]", "ao[2]"}, func(x []float64) (int, bool) { return aoVote(x[0], x[1], x[2]) },
			[][]float64{{1, -1, -2}, {1, 0, -1}, {2, 1, 3}, {2, 1, 0.5}, {-1, 1, 2}, {-1, 0, 1}, {-2, -1, -3}, {-2, -1, -0.5},
				{0, -1, -2}, {1, 1, 3}, {1, nan, 0}}},
		{"momentum_10", []string{"mom", "mom[1]"}, func(x []float64) (int, bool) { return momVote(x[0], x[1]) },
			[][]float64{{2, 1}, {1, 2}, {1, 1}, {1, nan}}},
		{"macd_12_26_9", []string{"macd", "signal"}, func(x []float64) (int, bool) { return macdVote(x[0], x[1]) },
			[][]float64{{2, 1}, {1, 2}, {1, 1}, {1, nan}, {nan, 1}}},
		{"stoch_rsi_14_14_3_3", []string{"close", "ema50", "k", "d"}, func(x []float64) (int, bool) { return stochRSIVote(x[0], x[1], x[2], x[3]) },
			[][]float64{{99, 100, 15, 10}, {101, 100, 15, 10}, {99, 100, 10, 10}, {100, 100, 15, 10}, {101, 100, 85, 90},
				{99, 100, 85, 90}, {101, 100, 90, 90}, {99, 100, 20, 10}, {99, nan, 15, 10}}},
		{"williams_r_14", []string{"wr", "wr[1]"}, func(x []float64) (int, bool) { return williamsRVote(x[0], x[1]) },
			[][]float64{{-85, -90}, {-80, -90}, {-85, -85}, {-15, -10}, {-20, -10}, {-50, -60}, {-85, nan}}},
		{"bull_bear_power_13", []string{"close", "ema50", "bull", "bull[1]", "bear", "bear[1]"},
			func(x []float64) (int, bool) { return bullBearVote(x[0], x[1], x[2], x[3], x[4], x[5]) },
			[][]float64{{101, 100, 2, 3, -1, -2}, {101, 100, 2, 3, 0, -2}, {101, 100, 2, 3, -1, -1}, {99, 100, 2, 3, -1, -2},
				{99, 100, 0, 3, -1, -2}, {99, 100, 2, 2, -1, -2}, {100, 100, 2, 3, -1, -2}, {101, nan, 2, 3, -1, -2}}},
		{"ultimate_oscillator_7_14_28", []string{"uo"}, func(x []float64) (int, bool) { return ultimateVote(x[0]) },
			[][]float64{{71}, {70}, {29}, {30}, {50}, {nan}}},
	}
	var out []voteVector
	for _, r := range rules {
		for _, row := range r.rows {
			vv := voteVector{Factor: r.factor, Inputs: map[string]*float64{}}
			for i, name := range r.names {
				if !math.IsNaN(row[i]) {
					vv.Inputs[name] = &row[i]
				} else {
					vv.Inputs[name] = nil
				}
			}
			if v, ok := r.vote(row); ok {
				vv.Vote = &v
			}
			out = append(out, vv)
		}
	}
	return out
}

// verdictVector is one row of verdict.json.
type verdictVector struct {
	Previous Verdict `json:"previous"`
	Overall  int     `json:"overall_score"`
	Verdict  Verdict `json:"verdict"`
}

func verdictVectors() []verdictVector {
	var scores []int
	for _, s := range []int{-100, DeclineEnter, DeclineHold, 0, GrowthHold, GrowthEnter, 100} {
		for _, d := range []int{-1, 0, 1} {
			if v := s + d; v >= -100 && v <= 100 && !slices.Contains(scores, v) {
				scores = append(scores, v)
			}
		}
	}
	var out []verdictVector
	for _, prev := range []Verdict{"", VerdictNeutral, VerdictGrowth, VerdictDecline} {
		for _, s := range scores {
			out = append(out, verdictVector{Previous: prev, Overall: s, Verdict: DecideVerdict(prev, s)})
		}
	}
	return out
}

// fundamentalVector is one row of fundamentals.json: a market's inputs,
// the close change the open interest is read with, and the fundamental
// factors and score.
type fundamentalVector struct {
	Market      string           `json:"market"`
	Inputs      Fundamentals     `json:"inputs"`
	PriceChange float64          `json:"price_change"`
	Factors     []expectedFactor `json:"factors"`
	Score       *int             `json:"score"`
}

func fundamentalVectors() []fundamentalVector {
	f := func(v float64) *float64 { return &v }
	rows := []struct {
		m  domain.Market
		in Fundamentals
		pc float64
	}{
		{domain.Crypto, Fundamentals{FundingRate: f(fundingHigh)}, 1},
		{domain.Crypto, Fundamentals{FundingRate: f(fundingHigh - 1e-6)}, 1},
		{domain.Crypto, Fundamentals{FundingRate: f(fundingLow)}, 1},
		{domain.Crypto, Fundamentals{FundingRate: f(fundingLow + 1e-6)}, 1},
		{domain.Crypto, Fundamentals{OpenInterestChange: f(oiMove)}, 1},
		{domain.Crypto, Fundamentals{OpenInterestChange: f(oiMove)}, -1},
		{domain.Crypto, Fundamentals{OpenInterestChange: f(oiMove)}, 0},
		{domain.Crypto, Fundamentals{OpenInterestChange: f(-0.5)}, 1},
		{domain.Crypto, Fundamentals{VolumeToMarketCap: f(liquidityHigh)}, 0},
		{domain.Crypto, Fundamentals{VolumeToMarketCap: f(liquidityLow)}, 0},
		{domain.Crypto, Fundamentals{VolumeToMarketCap: f(liquidityLow - 1e-6)}, 0},
		{domain.Crypto, Fundamentals{FundingRate: f(fundingLow), OpenInterestChange: f(0.1), VolumeToMarketCap: f(0.005)}, -1},
		{domain.Stocks, Fundamentals{PE: f(0)}, 0},
		{domain.Stocks, Fundamentals{PE: f(MarketPE * peCheap)}, 0},
		{domain.Stocks, Fundamentals{PE: f(MarketPE*peCheap - 0.01)}, 0},
		{domain.Stocks, Fundamentals{PE: f(MarketPE * peExpensive)}, 0},
		{domain.Stocks, Fundamentals{PE: f(20), SectorPE: f(40)}, 0},
		{domain.Stocks, Fundamentals{PE: f(20), SectorPE: f(-5)}, 0},
		{domain.Stocks, Fundamentals{RevenueGrowth: f(growthStrong)}, 0},
		{domain.Stocks, Fundamentals{RevenueGrowth: f(0)}, 0},
		{domain.Stocks, Fundamentals{RevenueGrowth: f(-0.01)}, 0},
		{domain.Stocks, Fundamentals{NetMargin: f(marginStrong)}, 0},
		{domain.Stocks, Fundamentals{NetMargin: f(-0.01)}, 0},
		{domain.Stocks, Fundamentals{DebtToEquity: f(leverageLow)}, 0},
		{domain.Stocks, Fundamentals{DebtToEquity: f(leverageLow - 0.01)}, 0},
		{domain.Stocks, Fundamentals{DebtToEquity: f(leverageHigh)}, 0},
		{domain.Stocks, Fundamentals{DebtToEquity: f(-0.5)}, 0},
		{domain.Stocks, Fundamentals{PE: f(10), RevenueGrowth: f(0.2), NetMargin: f(0.2), DebtToEquity: f(0.1)}, 0},
		{domain.Forex, Fundamentals{PolicyRateDiff: f(rateDiffMin)}, 0},
		{domain.Forex, Fundamentals{PolicyRateDiff: f(-rateDiffMin)}, 0},
		{domain.Forex, Fundamentals{PolicyRateDiff: f(-rateDiffMin - 0.01)}, 0},
		{domain.Forex, Fundamentals{InflationDiff: f(inflationDiff)}, 0},
		{domain.Forex, Fundamentals{InflationDiff: f(-inflationDiff)}, 0},
		{domain.Forex, Fundamentals{InflationDiff: f(-inflationDiff - 0.01)}, 0},
		{domain.Forex, Fundamentals{PolicyRateDiff: f(1), InflationDiff: f(2)}, 0},
		{domain.Forex, Fundamentals{FundingRate: f(0.01)}, 0},
	}
	var out []fundamentalVector
	for _, r := range rows {
		fv := fundamentalVector{Market: string(r.m), Inputs: r.in, PriceChange: r.pc, Factors: []expectedFactor{}}
		fs := fundamental(r.m, &r.in, r.pc)
		for _, x := range fs {
			fv.Factors = append(fv.Factors, expectedFactor{Name: x.Name, Group: x.Group, Sentiment: x.Sentiment, Weight: x.Weight})
		}
		if len(fs) > 0 {
			s := scoreOf(fs)
			fv.Score = &s
		}
		out = append(out, fv)
	}
	return out
}

// TestUpdateRefusesToChangeAPublishedAnswer: -update may add rows to a
// table of edges, never give a published row another answer.
func TestUpdateRefusesToChangeAPublishedAnswer(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "votes.json")
	if err := os.WriteFile(path, []byte(`[{"factor":"rsi_14","inputs":{"rsi":30,"rsi[1]":25},"vote":0}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	added := []byte(`[{"factor":"rsi_14","inputs":{"rsi":30,"rsi[1]":25},"vote":0},{"factor":"rsi_14","inputs":{"rsi":20,"rsi[1]":25},"vote":0}]`)
	if d := changedRows(t, path, added, tableOutputs["votes.json"]); len(d) != 0 {
		t.Errorf("an added row was refused: %v", d)
	}
	changed := []byte(`[{"factor":"rsi_14","inputs":{"rsi":30,"rsi[1]":25},"vote":1}]`)
	if d := changedRows(t, path, changed, tableOutputs["votes.json"]); len(d) != 1 {
		t.Errorf("a changed answer was not refused: %v", d)
	}
}
