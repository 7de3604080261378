package feeds

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

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

// exchangeInfoTTL is how long a crypto exchange's symbol list is served
// from the cache before it is fetched again.
const exchangeInfoTTL = time.Hour

// symbolMap maps exchange symbols to canonical ones for one instrument.
type symbolMap struct {
	fetched   time.Time
	toCanon   map[string]string // BTCUSDT → BTC_USDT
	fromCanon map[string]string // BTC_USDT → BTCUSDT (the pair, for continuous klines)
	symbols   []string          // canonical, sorted
}

func newSymbolMap(fetched time.Time) *symbolMap {
	return &symbolMap{fetched: fetched, toCanon: map[string]string{}, fromCanon: map[string]string{}}
}

func (m *symbolMap) add(exchange, canonical, request string) {
	m.toCanon[exchange] = canonical
	if _, dup := m.fromCanon[canonical]; !dup {
		m.fromCanon[canonical] = request
		m.symbols = append(m.symbols, canonical)
	}
}

// symbolList is Provider.Symbols over a cached map: a copy of its
// canonical symbols.
func symbolList(m *symbolMap, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	return slices.Clone(m.symbols), nil
}

// symbolCache holds a crypto adapter's symbol maps by instrument and
// refreshes each after exchangeInfoTTL. A failed download keeps serving
// the cached map (a stale list beats no list); a response that does not
// parse is an error.
type symbolCache struct {
	log  *slog.Logger
	now  func() time.Time
	feed string // for the log
	what string // the listing endpoint, for the log: "exchangeInfo", "products"

	mu   sync.Mutex
	maps map[string]*symbolMap
}

func newSymbolCache(log *slog.Logger, now func() time.Time, feed, what string) *symbolCache {
	return &symbolCache{log: log, now: now, feed: feed, what: what, maps: map[string]*symbolMap{}}
}

// get returns the map of instrument. When it is missing or older than
// exchangeInfoTTL, fetch downloads the listing and parse builds the map
// from it, stamped with the current time.
func (sc *symbolCache) get(instrument string, fetch func() ([]byte, error), parse func(body []byte, now time.Time) (*symbolMap, error)) (*symbolMap, error) {
	sc.mu.Lock()
	m := sc.maps[instrument]
	sc.mu.Unlock()
	if m != nil && sc.now().Sub(m.fetched) < exchangeInfoTTL {
		return m, nil
	}
	body, err := fetch()
	if err != nil {
		if m != nil {
			sc.log.Warn("feeds: "+sc.feed+": "+sc.what+" refresh failed, using cached symbols", "instrument", instrument, "err", err)
			return m, nil
		}
		return nil, err
	}
	if m, err = parse(body, sc.now()); err != nil {
		return nil, err
	}
	sc.mu.Lock()
	sc.maps[instrument] = m
	sc.mu.Unlock()
	return m, nil
}
