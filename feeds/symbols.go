package feeds

import (
	"strings"

	"github.com/marketscreener/market/domain"
)

// concatQuotes are the quote assets concatenated exchange symbols
// (BTCUSDT) end with; the longest matching suffix wins, so BTCUSDT splits
// as BTC+USDT and not BTCUSD+T.
func concatQuotes() []string {
	return []string{
		"FDUSD", "USDT", "USDC", "TUSD", "BUSD", "USDP", "BIDR", "IDRT", "AEUR",
		"DAI", "BTC", "ETH", "BNB", "XRP", "TRX", "DOGE", "SOL",
		"TRY", "EUR", "GBP", "BRL", "AUD", "JPY", "RUB", "UAH", "ZAR", "ARS",
		"PLN", "RON", "MXN", "COP", "CZK", "USD",
	}
}

// splitConcatSymbol splits a concatenated exchange symbol (BTCUSDT) into
// the canonical BASE_QUOTE form by its known quote suffix.
func splitConcatSymbol(s string) (string, bool) {
	s = strings.ToUpper(s)
	best := ""
	for _, q := range concatQuotes() {
		if len(q) > len(best) && len(s) > len(q) && strings.HasSuffix(s, q) {
			best = q
		}
	}
	if best == "" {
		return "", false
	}
	return domain.NormalizeSymbol(domain.Crypto, s[:len(s)-len(best)]+"_"+best)
}

// joinSymbol turns a canonical BASE_QUOTE into an exchange symbol with the
// given separator ("" for BTCUSDT, "-" for BTC-USDT).
func joinSymbol(canonical, sep string) string {
	return strings.Replace(canonical, "_", sep, 1)
}

// canonicalPair builds BASE_QUOTE from an exchange's base and quote assets.
func canonicalPair(m domain.Market, base, quote string) (string, bool) {
	return domain.NormalizeSymbol(m, base+"_"+quote)
}
