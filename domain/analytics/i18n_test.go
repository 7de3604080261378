package analytics

import (
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/indicator"
)

var placeholderRE = regexp.MustCompile(`\{[a-z_]+\}`)

func placeholders(s string) []string {
	p := placeholderRE.FindAllString(s, -1)
	slices.Sort(p)
	return slices.Compact(p)
}

// Every key exists in all six languages with the same placeholders, and no
// translation is a copy of the English text.
func TestCatalogueComplete(t *testing.T) {
	t.Parallel()
	for key, tx := range catalogue {
		en := tx.en
		want := placeholders(en)
		for _, l := range Langs {
			s := tx.in(l)
			if strings.TrimSpace(s) == "" {
				t.Errorf("%s: %s text missing", key, l)
				continue
			}
			if got := placeholders(s); !slices.Equal(got, want) {
				t.Errorf("%s/%s: placeholders %v, English has %v", key, l, got, want)
			}
			if l != "en" && s == en {
				t.Errorf("%s/%s: identical to the English text %q", key, l, en)
			}
		}
	}
}

// englishWords are common English words that must not appear in the
// output of another language. Indicator names (RSI, MACD) are
// language-neutral and not listed, nor are words shared with a target
// language ("volume" is Portuguese too, "neutral" Spanish).
var englishWords = regexp.MustCompile(`(?i)\b(the|is|are|and|of|above|below|vote|buy|sell|bullish|bearish|support|resistance|score|expected|price|trend|while|toward|factors|unavailable|scenario|close|average|oversold|overbought|rising|falling|crossed|line)\b`)

// allReports scores a spread of inputs that together reach every kind of
// factor, so their texts can be checked in every language.
func allReports(t *testing.T) []Result {
	t.Helper()
	inputs := []Input{
		{Market: domain.Crypto, Symbol: "BTC_USDT", Candles: walk(400, 1, 0.004, 0.01),
			Fundamentals: &Fundamentals{FundingRate: ptr(0.001), OpenInterestChange: ptr(0.05), VolumeToMarketCap: ptr(0.2)}},
		{Market: domain.Crypto, Symbol: "ETH_USDT", Candles: walk(400, 2, -0.004, 0.01),
			Fundamentals: &Fundamentals{FundingRate: ptr(-0.001), OpenInterestChange: ptr(0.05), VolumeToMarketCap: ptr(0.001)}},
		{Market: domain.Crypto, Symbol: "SOL_USDT", Candles: walk(400, 3, 0, 0.01),
			Fundamentals: &Fundamentals{FundingRate: ptr(0.0001), OpenInterestChange: ptr(-0.05), VolumeToMarketCap: ptr(0.05)}},
		{Market: domain.Stocks, Symbol: "AAPL", Candles: walk(300, 4, 0.002, 0.01),
			Fundamentals: &Fundamentals{PE: ptr(10), SectorPE: ptr(20), RevenueGrowth: ptr(0.2), NetMargin: ptr(0.3), DebtToEquity: ptr(0.2)}},
		{Market: domain.Stocks, Symbol: "TSLA", Candles: walk(300, 5, -0.002, 0.01),
			Fundamentals: &Fundamentals{PE: ptr(80), RevenueGrowth: ptr(-0.1), NetMargin: ptr(-0.05), DebtToEquity: ptr(3)}},
		{Market: domain.Stocks, Symbol: "IBM", Candles: walk(300, 6, 0, 0.01),
			Fundamentals: &Fundamentals{PE: ptr(-5), RevenueGrowth: ptr(0.05), NetMargin: ptr(0.05), DebtToEquity: ptr(1)}},
		{Market: domain.Stocks, Symbol: "KO", Candles: walk(300, 7, 0, 0.01),
			Fundamentals: &Fundamentals{PE: ptr(20), SectorPE: ptr(21)}},
		{Market: domain.Forex, Symbol: "EUR_USD", Candles: walk(300, 8, 0.001, 0.003),
			Fundamentals: &Fundamentals{PolicyRateDiff: ptr(1), InflationDiff: ptr(-2)}},
		{Market: domain.Forex, Symbol: "GBP_USD", Candles: walk(300, 9, -0.001, 0.003),
			Fundamentals: &Fundamentals{PolicyRateDiff: ptr(-1), InflationDiff: ptr(2)}},
		{Market: domain.Forex, Symbol: "USD_JPY", Candles: walk(300, 10, 0, 0.003),
			Fundamentals: &Fundamentals{PolicyRateDiff: ptr(0), InflationDiff: ptr(0)}},
		{Market: domain.Forex, Symbol: "AUD_USD", Candles: walk(70, 11, 0, 0.003)},
	}
	var out []Result
	for _, in := range inputs {
		res, err := Score(in)
		if err != nil {
			t.Fatalf("%s: %v", in.Symbol, err)
		}
		out = append(out, res)
	}
	// Every pattern text, as a factor would carry it.
	var pats Result
	pats.Summary = msg("summary")
	for _, p := range indicator.Patterns {
		pats.Factors = append(pats.Factors, Factor{Text: msg("pattern." + string(p))})
	}
	return append(out, pats)
}

func messages(r Result) []Message {
	ms := []Message{r.Summary, r.Scenario.Text, r.Scenario.Invalidation}
	for _, f := range r.Factors {
		ms = append(ms, f.Text)
	}
	return ms
}

// Every message the scorer produces names a catalogue key, fills every
// placeholder, and renders without English in the other languages.
func TestReportsRenderInEveryLanguage(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, r := range allReports(t) {
		for _, f := range r.Factors {
			if f.Name != "" && !slices.Contains(FactorNames, f.Name) {
				t.Errorf("factor %q not in FactorNames", f.Name)
			}
		}
		for _, m := range messages(r) {
			if m.Key == "" {
				continue
			}
			seen[m.Key] = true
			if _, ok := catalogue[m.Key]; !ok {
				t.Errorf("message key %q not in the catalogue", m.Key)
			}
		}
		if r.Verdict == "" { // the synthetic pattern result
			continue
		}
		for _, l := range Langs {
			rep := r.Localize(l)
			texts := []string{rep.Summary, rep.Scenario.ScenarioText, rep.Scenario.InvalidationText}
			for _, f := range rep.Factors {
				texts = append(texts, f.Explanation)
			}
			for _, s := range texts {
				if s == "" || strings.ContainsAny(s, "{}") {
					t.Errorf("%s: empty or unfilled text %q", l, s)
				}
				if l != "en" {
					if w := englishWords.FindString(s); w != "" {
						t.Errorf("%s: English word %q in %q", l, w, s)
					}
				}
			}
		}
	}
	// Texts these inputs do not reach are still checked, filled with
	// dummy values, by TestCatalogueHasNoEnglishInOtherLanguages.
	if len(seen) < len(catalogue)/2 {
		t.Errorf("test inputs reach only %d of %d catalogue keys", len(seen), len(catalogue))
	}
}

// Every catalogue text in every language, filled with placeholder values,
// has no English word (the per-report test only sees reachable texts).
func TestCatalogueHasNoEnglishInOtherLanguages(t *testing.T) {
	t.Parallel()
	for key, tx := range catalogue {
		for _, l := range Langs {
			if l == "en" {
				continue
			}
			s := placeholderRE.ReplaceAllString(tx.in(l), "1")
			if w := englishWords.FindString(s); w != "" {
				t.Errorf("%s/%s: English word %q in %q", key, l, w, s)
			}
		}
	}
}

func TestRender(t *testing.T) {
	t.Parallel()
	m := msg("summary", "symbol", "BTC_USDT", "overall", "25", "verdict", ref("verdict.growth"), "technical", "30",
		"fundamental", ref("fundamental.unavailable"), "bullish", "10", "bearish", "5", "neutral", "3",
		"support", "100", "resistance", "120")
	en := Render("en", m)
	want := "BTC_USDT: overall score 25, growth expected. Technical score 30, fundamental score unavailable (no fundamental data). Bullish factors: 10, bearish: 5, neutral: 3. Support 100, resistance 120."
	if en != want {
		t.Errorf("Render en =\n%q\nwant\n%q", en, want)
	}
	if ru := Render("ru", m); !strings.Contains(ru, "ожидается рост") || !strings.Contains(ru, "недоступна") {
		t.Errorf("Render ru = %q", ru)
	}
	if got := Render("xx", msg("verdict.decline")); got != "ожидается снижение" {
		t.Errorf("unknown language renders %q, want the default (ru)", got)
	}
	if got := Render("en", msg("no.such.key")); got != "no.such.key" {
		t.Errorf("unknown key renders %q", got)
	}
	if got := Render("en", msg("uo.bull")); got != "The Ultimate Oscillator is {value}, above 70: buy vote." {
		t.Errorf("missing argument renders %q", got)
	}
}

// A message's arguments are kept in name order whatever the order they are
// given in, and are written and read as the JSON object a map was: the
// stored results keep their bytes.
func TestArgsAreAnObjectInNameOrder(t *testing.T) {
	t.Parallel()
	m := msg("summary", "symbol", "BTC_USDT", "overall", "25", "verdict", "@verdict.growth", "bearish", `a "<b>" & \`)
	var names []string
	for _, a := range m.Args {
		names = append(names, a.Name)
	}
	if want := []string{"bearish", "overall", "symbol", "verdict"}; !slices.Equal(names, want) {
		t.Errorf("names %v, want %v", names, want)
	}
	asMap := map[string]string{}
	for _, a := range m.Args {
		asMap[a.Name] = a.Value
	}
	got, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(struct {
		Key  string            `json:"key"`
		Args map[string]string `json:"args,omitempty"`
	}{m.Key, asMap})
	if err != nil || string(got) != string(want) {
		t.Fatalf("Marshal = %s, %v; want the map's %s", got, err, want)
	}
	var back Message
	if err := json.Unmarshal(want, &back); err != nil || !reflect.DeepEqual(back, m) {
		t.Errorf("Unmarshal(%s) = %+v, %v; want %+v", want, back, err, m)
	}
	if v, ok := m.Args.Get("overall"); !ok || v != "25" || m.Args.Value("nope") != "" {
		t.Errorf("Get(overall) = %q, %v; Value(nope) = %q", v, ok, m.Args.Value("nope"))
	}
	// Out of order and a name twice (the last value holds, as in a map).
	lit := Message{Key: "k", Args: Args{{"b", "1"}, {"a", "<2>"}, {"b", "3"}}}
	if b, err := json.Marshal(lit); err != nil || string(b) != `{"key":"k","args":{"a":"\u003c2\u003e","b":"3"}}` {
		t.Errorf("Marshal(%+v) = %s, %v", lit, b, err)
	}
	if v := lit.Args.Value("b"); v != "3" {
		t.Errorf("Value(b) = %q, want the last, 3", v)
	}
	for _, empty := range []string{`{"key":"k"}`, `{"key":"k","args":null}`} {
		var e Message
		if err := json.Unmarshal([]byte(empty), &e); err != nil || e.Args != nil {
			t.Errorf("Unmarshal(%s) = %+v, %v; want no arguments", empty, e, err)
		}
		if b, _ := json.Marshal(e); string(b) != `{"key":"k"}` {
			t.Errorf("Marshal(%+v) = %s", e, b)
		}
	}
}
