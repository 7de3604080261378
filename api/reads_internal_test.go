package api

import (
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/readcache"
)

// FuzzParseSymbolList: any symbols= value is either refused naming the
// parameter or gives 1..50 distinct canonical symbols.
func FuzzParseSymbolList(f *testing.F) {
	for _, seed := range []string{"BTC_USDT", "btc/usdt,ETH_USDT,btc_usdt", "", ",", "A,,B", "AAPL,BRK.B", strings.Repeat("X_Y,", 51)} {
		f.Add("crypto", seed)
		f.Add("stocks", seed)
	}
	f.Fuzz(func(t *testing.T, market, raw string) {
		m := domain.Market(market)
		set, err := parseSymbolList(m, "query.symbols", raw)
		if err != nil {
			var de *domain.Error
			if !domainError(err, &de) || de.Code != domain.EINVALID || len(de.Fields) != 1 || de.Fields[0].Location != "query.symbols" {
				t.Fatalf("%q: error %v does not name query.symbols", raw, err)
			}
			return
		}
		if len(set.list) == 0 || len(set.list) > maxBatchSymbols {
			t.Fatalf("%q: %d symbols", raw, len(set.list))
		}
		seen := map[string]bool{}
		for _, s := range set.list {
			if canon, ok := domain.NormalizeSymbol(m, s); !ok || canon != s || seen[s] || !set.has(s) {
				t.Fatalf("%q: symbol %q is not canonical, or repeated", raw, s)
			}
			seen[s] = true
		}
	})
}

func domainError(err error, target **domain.Error) bool {
	de, ok := err.(*domain.Error)
	*target = de
	return ok
}

func TestCacheControlCountsToTheNextTick(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		now      time.Time
		interval time.Duration
		want     string
	}{
		{at, time.Minute, "private, max-age=60"},
		{at.Add(time.Nanosecond), time.Minute, "private, max-age=60"},
		{at.Add(59 * time.Second), time.Minute, "private, max-age=1"},
		{at.Add(59*time.Second + 999*time.Millisecond), time.Minute, "private, max-age=1"},
		{at.Add(7 * time.Second), 10 * time.Second, "private, max-age=3"},
		{at.Add(5 * time.Minute), 15 * time.Minute, "private, max-age=600"},
		{at, 0, "private, no-cache"},
	} {
		if got := cacheControl(c.now, c.interval); got != c.want {
			t.Errorf("cacheControl(%v, %v) = %q, want %q", c.now.Format(time.TimeOnly+".000000000"), c.interval, got, c.want)
		}
	}
}

func TestPreconditions(t *testing.T) {
	t.Parallel()
	b := readcache.NewBody([]byte(`[1]`), time.Date(2026, 11, 22, 10, 15, 0, 500, time.UTC))
	if b.LastModified != "Sun, 22 Nov 2026 10:15:00 GMT" {
		t.Fatalf("LastModified %q", b.LastModified)
	}
	if again := readcache.NewBody([]byte(`[1]`), time.Time{}); again.ETag != b.ETag || again.LastModified != "" {
		t.Fatalf("same bytes, tag %s then %s; zero time gives %q", b.ETag, again.ETag, again.LastModified)
	}
	if other := readcache.NewBody([]byte(`[2]`), time.Time{}); other.ETag == b.ETag {
		t.Fatal("different bytes, same tag")
	}
	for _, c := range []struct {
		cond ConditionalParams
		want bool
	}{
		{ConditionalParams{}, false},
		{ConditionalParams{IfNoneMatch: b.ETag}, true},
		{ConditionalParams{IfNoneMatch: " W/" + b.ETag + " "}, true},
		{ConditionalParams{IfNoneMatch: `"a","b",` + b.ETag}, true},
		{ConditionalParams{IfNoneMatch: "*"}, true},
		{ConditionalParams{IfNoneMatch: `"a"`}, false},
		{ConditionalParams{IfNoneMatch: strings.Trim(b.ETag, `"`)}, false},
		{ConditionalParams{IfModifiedSince: "Sun, 22 Nov 2026 10:15:00 GMT"}, true},
		{ConditionalParams{IfModifiedSince: "Sun, 22 Nov 2026 10:14:59 GMT"}, false},
		{ConditionalParams{IfModifiedSince: "Sunday, 22-Nov-26 10:15:00 GMT"}, true}, // RFC 850 form
		{ConditionalParams{IfModifiedSince: "yesterday"}, false},
		{ConditionalParams{IfNoneMatch: `"a"`, IfModifiedSince: "Sun, 22 Nov 2026 10:15:00 GMT"}, false},
	} {
		if got := notModified(&c.cond, b); got != c.want {
			t.Errorf("notModified(%+v) = %v, want %v", c.cond, got, c.want)
		}
	}
}
