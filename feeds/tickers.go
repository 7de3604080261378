package feeds

import (
	"sync"

	"github.com/marketscreener/market/domain"
)

// tickersEach builds the tickers of providers that need one request per
// symbol, with at most n requests in flight, in the order of syms. row
// returns an error when its request failed, which fails the whole call
// (the first by symbol order); it returns a nil ticker and no error for a
// bad row it has logged and dropped.
func tickersEach(syms []string, n int, row func(sym string) (*domain.Ticker, error)) ([]domain.Ticker, error) {
	rows := make([]*domain.Ticker, len(syms))
	errs := make([]error, len(syms))
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, sym := range syms {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			rows[i], errs[i] = row(sym)
		})
	}
	wg.Wait()
	out := make([]domain.Ticker, 0, len(rows))
	for i, r := range rows {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if r != nil {
			out = append(out, *r)
		}
	}
	return out, nil
}
