package feeds

import (
	"errors"
	"log/slog"
	"testing"
	"time"
)

func TestSymbolCache(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	clk := &clock{t: testNow}
	sc := newSymbolCache(slog.New(slog.NewTextHandler(logs, nil)), clk.now, "test", "listing")
	fetches := 0
	var fetchErr, parseErr error
	fetch := func() ([]byte, error) { fetches++; return []byte("BTC_USDT"), fetchErr }
	parse := func(body []byte, now time.Time) (*symbolMap, error) {
		if parseErr != nil {
			return nil, parseErr
		}
		m := newSymbolMap(now)
		m.add(string(body), string(body), string(body))
		return m, nil
	}

	first, err := sc.get("spot", fetch, parse)
	if err != nil || fetches != 1 {
		t.Fatalf("first get: %v after %d fetches", err, fetches)
	}
	if m, _ := sc.get("spot", fetch, parse); m != first || fetches != 1 {
		t.Errorf("within the TTL: fetched %d times", fetches)
	}
	if _, err := sc.get("perpetual", fetch, parse); err != nil || fetches != 2 {
		t.Errorf("another instrument: %v after %d fetches", err, fetches)
	}

	// Stale: a failed download keeps the cached map, a bad listing is an error.
	clk.set(testNow.Add(exchangeInfoTTL))
	fetchErr = errors.New("upstream down")
	if m, err := sc.get("spot", fetch, parse); m != first || err != nil || logs.count("test: listing refresh failed") != 1 {
		t.Errorf("failed refresh: %v, %v, logs:\n%s", m, err, logs)
	}
	fetchErr, parseErr = nil, errors.New("bad listing")
	if _, err := sc.get("spot", fetch, parse); !errors.Is(err, parseErr) {
		t.Errorf("bad listing: %v", err)
	}
	parseErr = nil
	if m, err := sc.get("spot", fetch, parse); err != nil || m == first || !m.fetched.Equal(testNow.Add(exchangeInfoTTL)) {
		t.Errorf("refresh: %+v, %v", m, err)
	}
	if _, err := sc.get("unknown", func() ([]byte, error) { return nil, errors.New("down") }, parse); err == nil {
		t.Error("nothing cached and the download failed: want an error")
	}
}
