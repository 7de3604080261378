package main

import (
	"bufio"
	"regexp"
	"strings"
	"testing"
)

// A trace in dlv's format: the request's goroutine (7) goes a → b → a → c
// → a; another goroutine's calls and what follows the root's return do not
// count.
const trace = `> goroutine(1): github.com/m/x.setup()
> goroutine(7): github.com/m/api.(*Server).requestMiddleware.func1(w, r)
> goroutine(7): github.com/m/api.(*boundRoute).ServeHTTP(b, w, r)
> goroutine(9): github.com/m/store.other()
>> goroutine(7): github.com/m/api.(*boundRoute).ServeHTTP => ()
> goroutine(7): github.com/m/store.(*DB).Candles(db)
> goroutine(7): github.com/m/api.encode()
> goroutine(7): github.com/m/domain.Validate()
> goroutine(7): github.com/m/api.metrics()
>> goroutine(7): github.com/m/api.(*Server).requestMiddleware.func1 => ()
> goroutine(7): github.com/m/store.(*DB).Candles(db)
`

func TestRequestFilesAndReentries(t *testing.T) {
	files := map[string]string{
		"github.com/m/api.(*Server).requestMiddleware.func1": "api/pipeline.go",
		"github.com/m/api.(*boundRoute).ServeHTTP":           "api/pipeline.go",
		"github.com/m/store.(*DB).Candles":                   "store/marketdata.go",
		"github.com/m/api.encode":                            "api/pipeline.go",
		"github.com/m/domain.Validate":                       "domain/marketdata.go",
		"github.com/m/api.metrics":                           "api/metrics.go",
		"github.com/m/store.other":                           "store/other.go",
	}
	seq, calls := requestFiles(bufio.NewScanner(strings.NewReader(trace)),
		regexp.MustCompile(`api\.\(\*Server\)\.requestMiddleware\.func1$`), files)
	if calls != 6 {
		t.Errorf("calls = %d, want 6", calls)
	}
	visits, reentries := count(seq)
	if len(visits) != 4 || visits["api/pipeline.go"] != 3 {
		t.Errorf("visits = %v, want 4 files, 3 calls in api/pipeline.go", visits)
	}
	if reentries != 1 { // pipeline.go → marketdata.go → pipeline.go
		t.Errorf("re-entries = %d, want 1", reentries)
	}
}
