package screen

import (
	"math"
	"slices"
	"sync"

	"github.com/marketscreener/market/domain/analytics"
)

// Table is a list of assets laid out by variable for programs that each
// pass over all of them (a screen query over a market's snapshot). The
// first program to read a variable fills its column, one value an asset;
// later programs read the column in order instead of following each
// asset's pointers to its report and factor. Columns are kept with the
// table (at most maxTableColumns), so a table lives as long as the
// assets it was made of are current. Safe for concurrent use.
type Table struct {
	assets []*Asset
	mu     sync.Mutex
	cols   map[colKey]*tableColumn
	scored [4]struct { // by index in analytics.Styles, as Asset.reports
		once sync.Once
		set  []uint64
	}
}

// maxTableColumns bounds the columns a table keeps: a column of 13,000
// assets is 117 kB, plus its distinct texts for a text. Past it, a
// program's columns are filled for it alone.
const maxTableColumns = 128

type colKey struct {
	v     *Variable
	style int
}

type tableColumn struct {
	once sync.Once
	c    column
}

// column is one variable's value for each asset of a table: kinds, and
// the numbers as their bits or, for a text, its code in dict (each
// distinct text once: comparing a text with a literal compares codes).
type column struct {
	k    []kind
	n    []uint64
	dict []string
	code map[string]uint64
}

func (c *column) at(i int) dval {
	switch k := c.k[i]; k {
	case kInt:
		return dval{k: k, i: int64(c.n[i])}
	case kDouble:
		return dval{k: k, d: math.Float64frombits(c.n[i])}
	case kString:
		return dval{k: k, s: c.dict[c.n[i]]}
	default:
		return dval{k: k}
	}
}

// NewTable lays out assets (not copied; they must not change).
func NewTable(assets []*Asset) *Table {
	return &Table{assets: assets, cols: map[colKey]*tableColumn{}}
}

// Scored is the set of the assets scored in style st ("" for
// analytics.DefaultStyle), bit i for asset i; nil for an unknown style.
func (t *Table) Scored(st analytics.Style) []uint64 {
	if st == "" {
		st = analytics.DefaultStyle
	}
	si := slices.Index(analytics.Styles, st)
	if si < 0 {
		return nil
	}
	sc := &t.scored[si]
	sc.once.Do(func() {
		sc.set = make([]uint64, (len(t.assets)+63)/64)
		for i, a := range t.assets {
			if a.reports[si] != nil {
				sc.set[i/64] |= 1 << (i % 64)
			}
		}
	})
	return sc.set
}

// column is r's column, filled on first use.
func (t *Table) column(r reader) *column {
	key := colKey{r.v, r.style}
	t.mu.Lock()
	tc, ok := t.cols[key]
	if !ok {
		tc = &tableColumn{}
		if len(t.cols) < maxTableColumns {
			t.cols[key] = tc
		}
	}
	t.mu.Unlock()
	tc.once.Do(func() { tc.c = fill(t.assets, r) })
	return &tc.c
}

// fill is r's column over assets: each value as the direct form reads it
// from the asset (an error where the style is absent, kOversize for a
// text over the estimate's size).
func fill(assets []*Asset, r reader) column {
	c := column{k: make([]kind, len(assets)), n: make([]uint64, len(assets))}
	text := r.v.text()
	if text {
		c.code = map[string]uint64{}
	}
	for i, a := range assets {
		if r.style >= 0 && a.reports[r.style] == nil {
			c.k[i] = kErr
			continue
		}
		v := r.v.load(a, r.style)
		if text {
			v = bounded(v)
		}
		c.k[i] = v.k
		switch v.k {
		case kInt:
			c.n[i] = uint64(v.i)
		case kDouble:
			c.n[i] = math.Float64bits(v.d)
		case kString:
			code, ok := c.code[v.s]
			if !ok {
				code = uint64(len(c.dict))
				c.dict = append(c.dict, v.s)
				c.code[v.s] = code
			}
			c.n[i] = code
		}
	}
	return c
}

// Scalar is a variable's value as an order reads it: a number, a text, or
// null (also for a style the asset was not scored in).
type Scalar struct {
	Null, Text bool
	Num        float64
	Str        string
}

// TableValues reads variable name (one of the market's Variables, an
// unprefixed report field in the program's style) of t's assets by index,
// from t's column; false for a name the market does not have.
func (p *Program) TableValues(t *Table, name string) (func(i int) Scalar, bool) {
	v, ok := envs[p.market].byName[name]
	if !ok {
		return nil, false
	}
	r := readerFor(v, p.style)
	c := t.column(r)
	return func(i int) Scalar {
		switch c.k[i] {
		case kInt:
			return Scalar{Num: float64(int64(c.n[i]))}
		case kDouble:
			return Scalar{Num: math.Float64frombits(c.n[i])}
		case kString:
			return Scalar{Text: true, Str: c.dict[c.n[i]]}
		case kOversize:
			// The column holds no text over the estimate's size.
			return Scalar{Text: true, Str: p.resolve(t.assets[i], r).Value().(string)}
		}
		return Scalar{Null: true}
	}, true
}
