package exchangesim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// The REST endpoints feeds' Binance adapter calls, with the documented
// weights (binance-spot-api-docs rest-api.md; developers.binance.com,
// USDⓈ-M futures, market-data/rest-api) and payload shapes.

var (
	errSymbol   = &apiError{Code: -1121, Msg: "Invalid symbol."}
	errInterval = &apiError{Code: -1120, Msg: "Invalid interval."}
)

func respondJSON(v any) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) { writeJSON(w, v) }
}

// Spot exchangeInfo: weight 20.
func (s *Sim) spotExchangeInfo(r *http.Request) (int, func(http.ResponseWriter), *apiError) {
	rows := make([]map[string]any, 0, len(s.universe.spot))
	for _, sym := range s.universe.spot {
		rows = append(rows, map[string]any{
			"symbol": sym.name, "status": "TRADING", "baseAsset": sym.base, "baseAssetPrecision": 8,
			"quoteAsset": sym.quote, "quotePrecision": 8, "quoteAssetPrecision": 8,
			"baseCommissionPrecision": 8, "quoteCommissionPrecision": 8,
			"orderTypes":     []string{"LIMIT", "LIMIT_MAKER", "MARKET", "STOP_LOSS_LIMIT", "TAKE_PROFIT_LIMIT"},
			"icebergAllowed": true, "ocoAllowed": true, "otoAllowed": true, "quoteOrderQtyMarketAllowed": true,
			"allowTrailingStop": true, "cancelReplaceAllowed": true, "isSpotTradingAllowed": true,
			"isMarginTradingAllowed": false, "filters": []any{}, "permissions": []string{},
			"permissionSets": [][]string{{"SPOT"}}, "defaultSelfTradePreventionMode": "EXPIRE_MAKER",
			"allowedSelfTradePreventionModes": []string{"EXPIRE_TAKER", "EXPIRE_MAKER", "EXPIRE_BOTH"},
		})
	}
	return 20, respondJSON(map[string]any{
		"timezone": "UTC", "serverTime": s.cfg.Now().UnixMilli(),
		"rateLimits": []any{
			s.rateLimit("REQUEST_WEIGHT", s.cfg.SpotLimit),
			map[string]any{"rateLimitType": "ORDERS", "interval": "SECOND", "intervalNum": 10, "limit": 100},
			map[string]any{"rateLimitType": "RAW_REQUESTS", "interval": "MINUTE", "intervalNum": 5, "limit": 61000},
		},
		"exchangeFilters": []any{}, "symbols": rows,
	}), nil
}

// rateLimit is a rateLimits entry of the simulator's window.
func (s *Sim) rateLimit(kind string, limit int) map[string]any {
	iv, n := "MINUTE", int(s.cfg.Window/time.Minute)
	if s.cfg.Window%time.Minute != 0 {
		iv, n = "SECOND", max(1, int(s.cfg.Window/time.Second))
	}
	return map[string]any{"rateLimitType": kind, "interval": iv, "intervalNum": n, "limit": limit}
}

// USDⓈ-M exchangeInfo: weight 1.
func (s *Sim) futuresExchangeInfo(r *http.Request) (int, func(http.ResponseWriter), *apiError) {
	rows := make([]map[string]any, 0, len(s.universe.futures))
	for _, sym := range s.universe.futures {
		delivery := int64(4133404800000)
		if sym.contract != "PERPETUAL" {
			t, _ := time.Parse("060102", sym.name[len(sym.name)-6:])
			delivery = t.Add(8 * time.Hour).UnixMilli()
		}
		rows = append(rows, map[string]any{
			"symbol": sym.name, "pair": sym.pair, "contractType": sym.contract, "deliveryDate": delivery,
			"onboardDate": int64(1569398400000), "status": "TRADING", "baseAsset": sym.base,
			"quoteAsset": sym.quote, "marginAsset": "USDT", "pricePrecision": 2, "quantityPrecision": 3,
			"baseAssetPrecision": 8, "quotePrecision": 8, "underlyingType": "COIN", "underlyingSubType": []string{},
			"triggerProtect": "0.0500", "liquidationFee": "0.012500", "marketTakeBound": "0.05",
			"filters": []any{}, "orderTypes": []string{"LIMIT", "MARKET", "STOP", "STOP_MARKET"},
			"timeInForce": []string{"GTC", "IOC", "FOK", "GTX"},
		})
	}
	return 1, respondJSON(map[string]any{
		"timezone": "UTC", "serverTime": s.cfg.Now().UnixMilli(), "futuresType": "U_MARGINED",
		"rateLimits": []any{
			s.rateLimit("REQUEST_WEIGHT", s.cfg.FuturesLimit),
			map[string]any{"rateLimitType": "ORDERS", "interval": "MINUTE", "intervalNum": 1, "limit": 1200},
		},
		"exchangeFilters": []any{}, "assets": []any{map[string]any{"asset": "USDT", "marginAvailable": true, "autoAssetExchange": "-10000"}},
		"symbols": rows,
	}), nil
}

// Spot ticker/24hr: weight 2 for one symbol (symbol=, or symbols= with
// 1–20), 40 for 21–100, 80 for more or for all.
func (s *Sim) spotTickers(r *http.Request) (int, func(http.ResponseWriter), *apiError) {
	q := r.URL.Query()
	if name := q.Get("symbol"); name != "" {
		sym, ok := s.universe.spotBy[name]
		if !ok {
			return 2, nil, errSymbol
		}
		return 2, respondJSON(s.ticker(sym, true)), nil
	}
	syms := s.universe.spot
	weight := 80
	if v := q.Get("symbols"); v != "" {
		var names []string
		if err := json.Unmarshal([]byte(v), &names); err != nil || len(names) == 0 {
			return 2, nil, &apiError{Code: -1100, Msg: "Illegal characters found in parameter 'symbols'."}
		}
		syms = nil
		for _, n := range names {
			sym, ok := s.universe.spotBy[n]
			if !ok {
				return 2, nil, errSymbol
			}
			syms = append(syms, sym)
		}
		switch n := len(names); {
		case n <= 20:
			weight = 2
		case n <= 100:
			weight = 40
		}
	}
	return weight, s.tickers(syms, true), nil
}

// USDⓈ-M ticker/24hr: weight 1 for a symbol, 40 for all.
func (s *Sim) futuresTickers(r *http.Request) (int, func(http.ResponseWriter), *apiError) {
	if name := r.URL.Query().Get("symbol"); name != "" {
		sym, ok := s.universe.futuresBy[name]
		if !ok {
			return 1, nil, errSymbol
		}
		return 1, respondJSON(s.ticker(sym, false)), nil
	}
	return 40, s.tickers(s.universe.futures, false), nil
}

func (s *Sim) tickers(syms []*symbol, spot bool) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		rows := make([]map[string]any, len(syms))
		for i, sym := range syms {
			rows[i] = s.ticker(sym, spot)
		}
		writeJSON(w, rows)
	}
}

// ticker is the FULL 24 h rolling-window row of a symbol.
func (s *Sim) ticker(sym *symbol, spot bool) map[string]any {
	now := s.cfg.Now()
	open, last := sym.price(now.Add(-24*time.Hour)), sym.price(now)
	day := sym.candleAt(now.Add(-24*time.Hour), interval{"1d", 24 * time.Hour}, now)
	row := map[string]any{
		"symbol": sym.name, "priceChange": num(last - open), "priceChangePercent": strconv.FormatFloat((last/open-1)*100, 'f', 3, 64),
		"weightedAvgPrice": num((open + last) / 2), "lastPrice": num(last), "lastQty": num(1),
		"openPrice": num(open), "highPrice": num(day.h), "lowPrice": num(day.l),
		"volume": num(day.volume), "quoteVolume": num(day.quoteV),
		"openTime": now.Add(-24 * time.Hour).UnixMilli(), "closeTime": now.UnixMilli(),
		"firstId": int64(1000), "lastId": int64(1000) + day.trades, "count": day.trades,
	}
	if spot {
		row["prevClosePrice"], row["bidPrice"], row["bidQty"], row["askPrice"], row["askQty"] =
			num(open), num(last*0.9999), num(10), num(last*1.0001), num(10)
	}
	return row
}

// Spot klines: weight 2; limit default 500, max 1000.
func (s *Sim) spotKlines(r *http.Request) (int, func(http.ResponseWriter), *apiError) {
	sym, ok := s.universe.spotBy[r.URL.Query().Get("symbol")]
	if !ok {
		return 2, nil, errSymbol
	}
	respond, err := s.klines(r, sym, 1000)
	return 2, respond, err
}

// USDⓈ-M klines: weight by limit, [1,100) 1, [100,500) 2, [500,1000] 5,
// above 10; limit default 500, max 1500.
func (s *Sim) futuresKlines(r *http.Request) (int, func(http.ResponseWriter), *apiError) {
	w := futuresKlineWeight(r)
	sym, ok := s.universe.futuresBy[r.URL.Query().Get("symbol")]
	if !ok {
		return w, nil, errSymbol
	}
	respond, err := s.klines(r, sym, 1500)
	return w, respond, err
}

// continuousKlines: pair and contractType, weighted as klines.
func (s *Sim) continuousKlines(r *http.Request) (int, func(http.ResponseWriter), *apiError) {
	w := futuresKlineWeight(r)
	q := r.URL.Query()
	var sym *symbol
	switch q.Get("contractType") {
	case "PERPETUAL":
		sym = s.universe.futuresBy[q.Get("pair")]
	case "CURRENT_QUARTER":
		sym = s.universe.pairBy[q.Get("pair")]
	}
	if sym == nil {
		return w, nil, &apiError{Code: -1121, Msg: "Invalid pair."}
	}
	respond, err := s.klines(r, sym, 1500)
	return w, respond, err
}

func futuresKlineWeight(r *http.Request) int {
	limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil {
		limit = 500
	}
	switch {
	case limit < 100:
		return 1
	case limit < 500:
		return 2
	case limit <= 1000:
		return 5
	}
	return 10
}

// klines answers startTime/endTime/limit as documented: both absent, the
// newest limit klines; startTime, the oldest limit from it; endTime
// alone, the newest limit up to it.
func (s *Sim) klines(r *http.Request, sym *symbol, maxLimit int) (func(http.ResponseWriter), *apiError) {
	q := r.URL.Query()
	iv, ok := intervals[q.Get("interval")]
	if !ok {
		return nil, errInterval
	}
	limit := 500
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, &apiError{Code: -1100, Msg: "Illegal characters found in parameter 'limit'."}
		}
		limit = min(n, maxLimit)
	}
	now := s.cfg.Now()
	last := iv.truncate(now)
	if v := q.Get("endTime"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, &apiError{Code: -1100, Msg: "Illegal characters found in parameter 'endTime'."}
		}
		if end := iv.truncate(time.UnixMilli(ms)); end.Before(last) {
			last = end
		}
	}
	var opens []time.Time
	if v := q.Get("startTime"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, &apiError{Code: -1100, Msg: "Illegal characters found in parameter 'startTime'."}
		}
		t := iv.truncate(time.UnixMilli(ms))
		if t.Before(time.UnixMilli(ms)) {
			t = iv.next(t)
		}
		for ; !t.After(last) && len(opens) < limit; t = iv.next(t) {
			opens = append(opens, t)
		}
	} else {
		for t := last; len(opens) < limit; t = iv.prev(t) {
			opens = append(opens, t)
		}
		for i, j := 0, len(opens)-1; i < j; i, j = i+1, j-1 {
			opens[i], opens[j] = opens[j], opens[i]
		}
	}
	return func(w http.ResponseWriter) {
		rows := make([][]any, len(opens))
		for i, t := range opens {
			rows[i] = sym.candleAt(t, iv, now).row()
		}
		writeJSON(w, rows)
	}, nil
}

// premiumIndex: weight 1 for a symbol, 10 for all (the heavier of the
// documented figures).
func (s *Sim) premiumIndex(r *http.Request) (int, func(http.ResponseWriter), *apiError) {
	now := s.cfg.Now()
	row := func(sym *symbol) map[string]any {
		mark := sym.price(now)
		return map[string]any{
			"symbol": sym.name, "markPrice": num(mark), "indexPrice": num(mark / 1.0003),
			"estimatedSettlePrice": num(mark), "lastFundingRate": num(s.fundingRate(sym, now)),
			"interestRate": "0.00010000", "nextFundingTime": nextFunding(now, s.fundingHours(sym)).UnixMilli(),
			"time": now.UnixMilli(),
		}
	}
	if name := r.URL.Query().Get("symbol"); name != "" {
		sym, ok := s.universe.futuresBy[name]
		if !ok {
			return 1, nil, errSymbol
		}
		return 1, respondJSON(row(sym)), nil
	}
	return 10, func(w http.ResponseWriter) {
		rows := make([]map[string]any, len(s.universe.futures))
		for i, sym := range s.universe.futures {
			rows[i] = row(sym)
		}
		writeJSON(w, rows)
	}, nil
}

// fundingInfo lists the symbols whose funding settings were adjusted
// (cap, floor, or an interval other than 8 h): documented weight 0, a
// shared 500 requests / 5 min; counted 1 here.
func (s *Sim) fundingInfo(r *http.Request) (int, func(http.ResponseWriter), *apiError) {
	var rows []map[string]any
	for _, sym := range s.universe.futures {
		if h := s.fundingHours(sym); h != 8 && sym.contract == "PERPETUAL" {
			rows = append(rows, map[string]any{"symbol": sym.name, "adjustedFundingRateCap": "0.02500000",
				"adjustedFundingRateFloor": "-0.02500000", "fundingIntervalHours": h, "disclaimer": false})
		}
	}
	return 1, respondJSON(rows), nil
}

// fundingHours: most perpetuals settle every 8 h, some every 4 h or 1 h.
func (s *Sim) fundingHours(sym *symbol) int {
	switch v := sym.seed % 10; {
	case v == 0:
		return 1
	case v < 3:
		return 4
	}
	return 8
}

// fundingRate is the symbol's rate per its own interval: ±0.05 %.
func (s *Sim) fundingRate(sym *symbol, now time.Time) float64 {
	period := uint64(now.Unix() / 3600)
	return (unit(mix(sym.seed, period)) - 0.4) * 0.001
}

func nextFunding(now time.Time, hours int) time.Time {
	return now.UTC().Truncate(time.Duration(hours) * time.Hour).Add(time.Duration(hours) * time.Hour)
}

// openInterestHist: periods 5m–1d, limit default 30, max 500, the latest
// 30 days; /futures/data/* weighs 0 but allows 1,000 requests per IP in
// 5 minutes. timestamp is a string, as in the documented example.
func (s *Sim) openInterestHist(r *http.Request) (int, func(http.ResponseWriter), *apiError) {
	q := r.URL.Query()
	sym, ok := s.universe.futuresBy[q.Get("symbol")]
	if !ok || sym.contract != "PERPETUAL" {
		return 1, nil, errSymbol
	}
	iv, ok := intervals[q.Get("period")]
	if !ok || iv.d < 5*time.Minute || iv.d > 24*time.Hour {
		return 1, nil, &apiError{Code: -1130, Msg: "Invalid data sent for a parameter."}
	}
	limit := 30
	if n, err := strconv.Atoi(q.Get("limit")); err == nil && n >= 1 {
		limit = min(n, 500)
	}
	now := s.cfg.Now()
	supply := 1e6 + 1e9*unit(mix(sym.seed, 7))
	return 1, func(w http.ResponseWriter) {
		rows := make([]map[string]any, 0, limit)
		t := iv.truncate(now)
		for i := limit - 1; i >= 0; i-- {
			ts := t.Add(-time.Duration(i) * iv.d)
			oi := 1e5 * (1 + 0.2*unit(mix(sym.seed, uint64(ts.Unix()))))
			rows = append(rows, map[string]any{"symbol": sym.name, "sumOpenInterest": num(oi),
				"sumOpenInterestValue": num(oi * sym.price(ts)), "CMCCirculatingSupply": num(supply),
				"timestamp": strconv.FormatInt(ts.UnixMilli(), 10)})
		}
		writeJSON(w, rows)
	}, nil
}
