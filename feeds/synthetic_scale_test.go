package feeds

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/marketscreener/market/domain"
)

func TestSyntheticSizedUniverse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 2000
	c := &clock{t: testNow}
	big := NewSyntheticSized(5, c.now, n)
	spot, err := big.Symbols(ctx, binanceSpot)
	if err != nil {
		t.Fatal(err)
	}
	// Every base asset against USDT, plus the fixed BTC and USDC crosses.
	if want := n + 10 + 6; len(spot) != want {
		t.Fatalf("binance spot lists %d symbols, want %d", len(spot), want)
	}
	seen := map[string]bool{}
	for _, sym := range spot {
		if seen[sym] {
			t.Errorf("symbol %s listed twice", sym)
		}
		seen[sym] = true
		if got, ok := domain.NormalizeSymbol(domain.Crypto, sym); !ok || got != sym {
			t.Errorf("symbol %q is not canonical", sym)
		}
	}
	if perp, _ := big.Symbols(ctx, binancePerp); len(perp) < n/2 {
		t.Errorf("binance perpetual lists %d symbols, want its default share of %d (≥ %d)", len(perp), n, n/2)
	}

	// A symbol beyond the fixed table: valid tickers and candles, the
	// same for the same seed, another walk for another seed.
	sym := spot[n-1]
	if sym == "" || slices.Contains(parseAssetNames(syntheticCrypto), sym[:len(sym)-len("_USDT")]) {
		t.Fatalf("last USDT pair %q is not a generated asset", sym)
	}
	candles, err := big.Candles(ctx, binanceSpot, sym, domain.TF1h, time.Time{}, 300)
	if err != nil {
		t.Fatal(err)
	}
	if len(candles) != 300 {
		t.Fatalf("%s: %d candles, want 300", sym, len(candles))
	}
	if err := domain.ValidateCandles(candles); err != nil {
		t.Fatalf("%s: %v", sym, err)
	}
	again, err := NewSyntheticSized(5, c.now, n).Candles(ctx, binanceSpot, sym, domain.TF1h, time.Time{}, 300)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(candles, again); diff != "" {
		t.Errorf("same seed, other candles (-first +second):\n%s", diff)
	}
	tickers, err := big.Tickers(ctx, binanceSpot)
	if err != nil {
		t.Fatal(err)
	}
	if len(tickers) != len(spot) {
		t.Fatalf("%d tickers for %d symbols", len(tickers), len(spot))
	}
	for _, tk := range tickers {
		if err := tk.Validate(); err != nil || tk.Volume <= 0 {
			t.Fatalf("ticker %+v: %v", tk, err)
		}
	}
	if _, err := big.Fundamentals(ctx, domain.Crypto, sym); err != nil {
		t.Errorf("fundamentals of %s: %v", sym, err)
	}
	other, _ := NewSyntheticSized(6, c.now, n).Symbols(ctx, binanceSpot)
	if slices.Equal(other, spot) {
		t.Error("another seed lists the same generated symbols")
	}
}

// Growing the universe leaves the default symbols, their order and their
// series as they are, so a benchmark at scale measures the same market.
func TestSyntheticSizedKeepsDefaultUniverse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &clock{t: testNow}
	def, big, same := NewSynthetic(1, c.now), NewSyntheticSized(1, c.now, 500), NewSyntheticSized(1, c.now, SyntheticDefaultCryptoAssets)
	for _, region := range domain.Regions {
		for _, combo := range domain.Catalogue(region) {
			want, _ := def.Symbols(ctx, combo)
			if got, _ := same.Symbols(ctx, combo); !slices.Equal(got, want) {
				t.Errorf("%s: the default size lists other symbols", combo)
			}
			got, _ := big.Symbols(ctx, combo)
			if combo.Market != domain.Crypto {
				if !slices.Equal(got, want) {
					t.Errorf("%s: a bigger crypto universe changed a %s list", combo, combo.Market)
				}
				continue
			}
			for _, sym := range want {
				if !slices.Contains(got, sym) {
					t.Errorf("%s: %s dropped from the bigger universe", combo, sym)
				}
			}
		}
	}
	for _, sym := range []string{"BTC_USDT", "RDNT_USDT", "ETH_BTC"} {
		want, err := def.Candles(ctx, binanceSpot, sym, domain.TF15m, time.Time{}, 200)
		if err != nil {
			t.Fatal(err)
		}
		got, err := big.Candles(ctx, binanceSpot, sym, domain.TF15m, time.Time{}, 200)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s candles differ in the bigger universe (-default +big):\n%s", sym, diff)
		}
	}
	small, _ := NewSyntheticSized(1, c.now, 20).Symbols(ctx, binanceSpot)
	if len(small) != 20+10+6 || !slices.Contains(small, "BTC_USDT") {
		t.Errorf("a 20-asset universe lists %d binance spot symbols: %v", len(small), small)
	}
}

func parseAssetNames(table string) []string {
	var out []string
	for _, a := range parseAssets(table) {
		out = append(out, a.name)
	}
	return out
}
