package exchangesim

import (
	"cmp"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// equity is one us_equity asset of the simulated universe and the
// parameters of its price path.
type equity struct {
	asset alpacaAsset

	seed      uint64
	price0    float64 // price level
	volume0   float64 // a typical day's SIP volume, shares
	liquidity float64 // the chance a regular-session minute has a trade on SIP
	tradeSize float64 // shares per trade
	listed    day     // first day with data
	delisted  day     // last day with data; 0 while listed
}

// alpacaAsset is the documented asset object ([docs-ref] get-v2-assets-1;
// [sdk-go] alpaca/entities.go Asset).
type alpacaAsset struct {
	ID                           string   `json:"id"`
	Class                        string   `json:"class"`
	Exchange                     string   `json:"exchange"`
	Symbol                       string   `json:"symbol"`
	Name                         string   `json:"name"`
	Status                       string   `json:"status"`
	Tradable                     bool     `json:"tradable"`
	Marginable                   bool     `json:"marginable"`
	MaintenanceMarginRequirement int      `json:"maintenance_margin_requirement"`
	MarginRequirementLong        string   `json:"margin_requirement_long"`
	MarginRequirementShort       string   `json:"margin_requirement_short"`
	Shortable                    bool     `json:"shortable"`
	EasyToBorrow                 bool     `json:"easy_to_borrow"`
	Fractionable                 bool     `json:"fractionable"`
	Cusip                        string   `json:"cusip"`
	Attributes                   []string `json:"attributes"`
}

// alpacaExchanges are Alpaca's exchange values ([docs-ref]
// get-v2-assets-1: AMEX, ARCA, BATS, NYSE, NASDAQ, NYSEARCA, OTC) and
// each one's share of the active universe. The shares are estimated, not
// documented: Nasdaq lists the most operating companies and SPACs with
// their warrants, units and rights; NYSE the large caps; NYSE Arca
// (ARCA; NYSEARCA survives on a few older records) most ETFs; Cboe BZX
// (BATS) a smaller set of ETFs; NYSE American (AMEX) small caps; OTC a
// few thousand more that Alpaca lists as not tradable.
var alpacaExchanges = []struct {
	name  string
	share float64
}{{"NASDAQ", 0.455}, {"NYSE", 0.245}, {"ARCA", 0.17}, {"BATS", 0.055}, {"AMEX", 0.03}, {"OTC", 0.04}, {"NYSEARCA", 0.005}}

// knownEquities open the universe with familiar names at their usual
// price levels, class shares (dotted, as Alpaca writes them: BRK.B)
// among them.
var knownEquities = map[string]string{
	"NASDAQ": "AAPL 230 MSFT 420 NVDA 180 AMZN 220 GOOGL 200 GOOG 201 META 700 TSLA 420 AVGO 340 COST 920 NFLX 1100 " +
		"AMD 220 PEP 145 ADBE 350 CSCO 68 INTC 24 QCOM 165 TXN 190 INTU 650 AMGN 290 SBUX 90 GILD 115 MU 150 " +
		"PYPL 70 ABNB 130 CRWD 450 QQQ 520 FOXA 48 NWSA 28 LBRDA 70",
	"NYSE": "JPM 300 V 340 MA 560 UNH 330 JNJ 175 WMT 100 PG 155 XOM 115 CVX 155 HD 390 KO 70 MRK 85 ABBV 210 " +
		"BAC 50 LLY 800 ORCL 250 CRM 250 DIS 112 MCD 295 PFE 25 T 27 VZ 41 IBM 280 GE 290 F 11 C 95 " +
		"BRK.A 730000 BRK.B 490 BF.A 40 BF.B 38 HEI.A 220 LEN.B 150 MOG.A 190 MOG.B 190 GEF.B 70 CWEN.A 30 " +
		"CRD.A 20 CRD.B 20 AKO.A 18 AKO.B 21 GTN.A 9 WSO.B 480 BIO.B 300 MKC.V 75 JW.A 40 TAP.A 55",
	"ARCA": "SPY 600 IWM 230 GLD 240 SLV 30 XLF 50 XLE 90 XLK 230 DIA 440 EEM 45 EFA 80 VTI 300 VOO 550 " +
		"TLT 90 HYG 80 LQD 110 XLV 145 XLY 220 XLP 80 XLI 140",
}

// listingExchange picks an exchange other than OTC by the shares of
// alpacaExchanges, for r in [0, 1): delisted assets were listed.
func listingExchange(r float64) string {
	total := 0.0
	for _, x := range alpacaExchanges {
		if x.name != "OTC" {
			total += x.share
		}
	}
	for _, x := range alpacaExchanges {
		if x.name == "OTC" {
			continue
		}
		if r -= x.share / total; r < 0 {
			return x.name
		}
	}
	return alpacaExchanges[0].name
}

func isAlpacaExchange(name string) bool {
	for _, x := range alpacaExchanges {
		if x.name == name {
			return true
		}
	}
	return false
}

// equityUniverse is every asset, in the documented order ("sorted by
// asset class, exchange and symbol").
type equityUniverse struct {
	list     []*equity
	bySymbol map[string]*equity
	byID     map[string]*equity
}

// dataStart is the first day with bars (Alpaca's history starts in 2016).
var dataStart = civilDay(2016, 1, 1)

func newEquityUniverse(seed uint64, active, inactive int, today day) *equityUniverse {
	u := &equityUniverse{bySymbol: map[string]*equity{}, byID: map[string]*equity{}}
	g := &symbolGen{seed: seed, taken: map[string]bool{}}
	counts := make([]int, len(alpacaExchanges))
	left := active
	for i, x := range alpacaExchanges {
		counts[i] = int(x.share * float64(active))
		left -= counts[i]
	}
	counts[0] += left
	for _, list := range knownEquities { // reserved before any ticker is drawn
		for j, f := range strings.Fields(list) {
			if j%2 == 0 {
				g.taken[f] = true
			}
		}
	}
	for i, x := range alpacaExchanges {
		fields := strings.Fields(knownEquities[x.name])
		made := 0
		for j := 0; j+1 < len(fields) && made < counts[i]; j += 2 {
			price, _ := strconv.ParseFloat(fields[j+1], 64)
			u.add(g.known(fields[j], x.name, price))
			made++
		}
		for ; made < counts[i]; made++ {
			u.add(g.generated(x.name, today, true))
		}
	}
	for n := 0; n < inactive; n++ {
		u.add(g.generated(listingExchange(unit(mix(seed, uint64(n)+77))), today, false))
	}
	slices.SortFunc(u.list, func(a, b *equity) int {
		return cmp.Or(cmp.Compare(a.asset.Exchange, b.asset.Exchange), cmp.Compare(a.asset.Symbol, b.asset.Symbol))
	})
	return u
}

func (u *equityUniverse) add(e *equity) {
	u.list = append(u.list, e)
	u.bySymbol[e.asset.Symbol] = e
	u.byID[e.asset.ID] = e
}

// symbolGen derives tickers, names and flags from the seed.
type symbolGen struct {
	seed  uint64
	n     uint64
	taken map[string]bool
}

func (g *symbolGen) next() uint64 {
	g.n++
	return mix(g.seed, g.n)
}

func (g *symbolGen) known(symbol, exchange string, price float64) *equity {
	h := mix(g.seed, hashString(symbol))
	etf := exchange == "ARCA" || symbol == "QQQ"
	e := &equity{seed: h, price0: price, volume0: 5e6 + 6e7*unit(mix(h, 1)), tradeSize: 90, listed: dataStart - 1}
	e.liquidity = 1
	name := strings.ReplaceAll(symbol, ".", " Class ") + " Inc. Common Stock"
	if etf {
		name = symbol + " Trust ETF"
	}
	e.asset = g.asset(h, symbol, exchange, name, true, true)
	e.asset.Fractionable, e.asset.Marginable, e.asset.Shortable, e.asset.EasyToBorrow = true, true, true, true
	e.asset.MaintenanceMarginRequirement, e.asset.MarginRequirementLong, e.asset.MarginRequirementShort = 30, "30", "30"
	e.asset.Attributes = []string{"has_options"}
	return e
}

const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

// ticker draws a ticker of the exchange's usual shape: Nasdaq four
// letters (five for warrants W, units U and rights R), NYSE one to four,
// ETFs three or four, OTC four, or five ending F (foreign ordinary) or Y (ADR).
func (g *symbolGen) ticker(exchange string) (symbol, kind string) {
	for {
		h := g.next()
		r := unit(h)
		n, suffix := 4, ""
		switch exchange {
		case "NASDAQ":
			switch {
			case r < 0.05:
				n = 2
			case r < 0.20:
				n = 3
			case r < 0.30:
				suffix = string("WUR"[h%3])
			}
		case "NYSE":
			switch {
			case r < 0.02:
				n = 1
			case r < 0.15:
				n = 2
			case r < 0.70:
				n = 3
			}
		case "OTC":
			if r < 0.6 {
				suffix = string("FY"[h%2])
			}
		default: // ARCA, BATS, AMEX, NYSEARCA
			if r < 0.45 {
				n = 3
			}
		}
		b := make([]byte, 0, n+1)
		for i := 0; i < n; i++ {
			b = append(b, letters[(h>>(8+5*i))%26])
		}
		symbol = string(b) + suffix
		if g.taken[symbol] {
			continue
		}
		g.taken[symbol] = true
		kind = "stock"
		switch {
		case suffix == "W":
			kind = "warrant"
		case suffix == "U":
			kind = "unit"
		case suffix == "R":
			kind = "right"
		case exchange == "ARCA" || exchange == "BATS" || exchange == "NYSEARCA" || exchange == "AMEX" && r > 0.6:
			kind = "etf"
		}
		return symbol, kind
	}
}

var (
	nameParts   = []string{"Vel", "Tor", "Ari", "Cor", "Max", "Gen", "Tri", "Nova", "Lux", "Sol", "Quant", "Arc", "Bio", "Med", "Tek", "Fin", "Sky", "Zen", "Pro", "Vita", "Ter", "Ocu", "Heli", "Nex"}
	nameEnds    = []string{"ion", "ex", "ara", "is", "on", "ix", "ora", "um", "ent", "ity"}
	companyForm = []string{"Holdings Inc.", "Corp.", "Group Inc.", "Therapeutics Inc.", "Technologies Inc.", "Bancorp Inc.", "Energy Inc.", "Industries Inc."}
	etfIssuers  = []string{"iShares", "Vanguard", "SPDR", "Invesco", "Global X", "First Trust", "ProShares", "WisdomTree"}
	etfThemes   = []string{"Core Bond", "Dividend Growth", "Small-Cap Value", "Clean Energy", "Semiconductor", "Emerging Markets", "Short Treasury", "Momentum Factor"}
)

func (g *symbolGen) generated(exchange string, today day, active bool) *equity {
	symbol, kind := g.ticker(exchange)
	h := mix(g.seed, hashString(symbol))
	company := nameParts[h%uint64(len(nameParts))] + nameEnds[(h>>8)%uint64(len(nameEnds))] + " " + companyForm[(h>>16)%uint64(len(companyForm))]
	e := &equity{seed: h, listed: dataStart - 1}
	switch kind {
	case "etf":
		e.price0 = 15 + 135*unit(mix(h, 2))
		e.volume0 = math.Pow(10, 3.7+2.8*unit(mix(h, 3)))
	case "warrant", "right":
		e.price0 = 0.02 + 0.6*unit(mix(h, 2))
		e.volume0 = math.Pow(10, 3+2*unit(mix(h, 3)))
	case "unit":
		e.price0 = 10 + unit(mix(h, 2))
		e.volume0 = math.Pow(10, 2.5+1.5*unit(mix(h, 3)))
	default:
		e.price0 = math.Pow(10, -0.3+2.9*unit(mix(h, 2))) // $0.50 to $400
		e.volume0 = math.Pow(10, 4.3+3*unit(mix(h, 3)))   // 20 thousand to 20 million shares
	}
	if exchange == "OTC" {
		e.price0 = math.Pow(10, -1.5+2.5*unit(mix(h, 2)))
		e.volume0 = math.Pow(10, 3+2.3*unit(mix(h, 3)))
	}
	e.tradeSize = 50 + 150*unit(mix(h, 4))
	// The chance of at least one trade in a regular-session minute, with
	// trades arriving at random: 1 - e^-(trades a minute).
	e.liquidity = 1 - math.Exp(-(e.volume0/e.tradeSize)/390)
	switch kind {
	case "etf":
		company = etfIssuers[h%uint64(len(etfIssuers))] + " " + nameParts[(h>>8)%uint64(len(nameParts))] + " " + etfThemes[(h>>16)%uint64(len(etfThemes))] + " ETF"
	case "warrant":
		company += " Warrant"
	case "unit":
		company += " Unit"
	case "right":
		company += " Right"
	default:
		company += " Common Stock"
		if exchange == "OTC" && strings.HasSuffix(symbol, "Y") {
			company += " ADR"
		}
	}
	if !active {
		e.delisted = today - day(30+int(unit(mix(h, 5))*1500))
	} else if unit(mix(h, 6)) < 0.005 {
		e.listed = today - day(1+int(unit(mix(h, 7))*25))
	}
	a := g.asset(h, symbol, exchange, company, active, active && exchange != "OTC")
	if a.Tradable && kind != "warrant" && kind != "right" && kind != "unit" && e.price0 >= 3 {
		a.Marginable = true
		a.MaintenanceMarginRequirement, a.MarginRequirementLong, a.MarginRequirementShort = 30, "30", "30"
		a.Shortable = unit(mix(h, 8)) < 0.9
		a.EasyToBorrow = a.Shortable && unit(mix(h, 9)) < 0.8
		a.Fractionable = unit(mix(h, 10)) < 0.7
		if unit(mix(h, 11)) < 0.4 {
			a.Attributes = append(a.Attributes, "has_options")
		}
	}
	if e.listed >= dataStart {
		a.Attributes = append(a.Attributes, "ipo")
	}
	if unit(mix(h, 12)) < 0.005 {
		a.Attributes = append(a.Attributes, "ptp_no_exception")
	}
	e.asset = a
	return e
}

// asset fills the fields every asset has; flags start off.
func (g *symbolGen) asset(h uint64, symbol, exchange, name string, active, tradable bool) alpacaAsset {
	status := "active"
	if !active {
		status = "inactive"
	}
	id := fmt.Sprintf("%016x%016x", mix(h, 100), mix(h, 101))
	id = id[0:8] + "-" + id[8:12] + "-4" + id[13:16] + "-" + string("89ab"[mix(h, 102)%4]) + id[17:20] + "-" + id[20:32]
	cusip := make([]byte, 9)
	for i := range cusip {
		cusip[i] = "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"[mix(h, uint64(200+i))%34]
	}
	return alpacaAsset{ID: id, Class: "us_equity", Exchange: exchange, Symbol: symbol, Name: name, Status: status,
		Tradable: tradable, MaintenanceMarginRequirement: 100, MarginRequirementLong: "100", MarginRequirementShort: "100",
		Cusip: string(cusip), Attributes: []string{}}
}

// listAssets serves GET /v2/assets: status (active, inactive; absent =
// all), asset_class (us_equity is the default and the only class
// simulated), exchange and attributes (any of a comma list) filters, as
// documented ([docs-ref] get-v2-assets-1). An unknown exchange, status or
// class is refused 422 (chosen).
func (a *alpacaSim) listAssets(r *http.Request) (any, *alpacaError) {
	q := r.URL.Query()
	status, class, exchange := q.Get("status"), q.Get("asset_class"), q.Get("exchange")
	if status != "" && status != "active" && status != "inactive" {
		return nil, errUnprocessable("invalid status: " + status)
	}
	switch class {
	case "", "us_equity":
	case "crypto", "us_option":
		return []alpacaAsset{}, nil
	default:
		return nil, errUnprocessable("invalid asset_class: " + class)
	}
	if exchange != "" && !isAlpacaExchange(exchange) {
		return nil, errUnprocessable("invalid exchange: " + exchange)
	}
	var attrs []string
	if v := q.Get("attributes"); v != "" {
		attrs = strings.Split(v, ",")
	}
	out := make([]alpacaAsset, 0, len(a.universe.list))
	for _, e := range a.universe.list {
		x := e.asset
		if status != "" && x.Status != status || exchange != "" && x.Exchange != exchange {
			continue
		}
		if attrs != nil && !slices.ContainsFunc(x.Attributes, func(s string) bool { return slices.Contains(attrs, s) }) {
			continue
		}
		out = append(out, x)
	}
	return out, nil
}

// getAsset serves GET /v2/assets/{symbol_or_asset_id}; 404 when unknown.
func (a *alpacaSim) getAsset(r *http.Request) (any, *alpacaError) {
	key := r.PathValue("symbol_or_asset_id")
	if e, ok := a.universe.bySymbol[key]; ok {
		return e.asset, nil
	}
	if e, ok := a.universe.byID[key]; ok {
		return e.asset, nil
	}
	return nil, errNotFound("asset not found")
}
