// Package archivetest generates a Binance public data archive for tests
// and benchmarks, written from the archive's README
// (https://github.com/binance/binance-public-data, "Where do I access it",
// "Klines" and the note on microsecond spot timestamps), no file or code of
// Binance's: the tree
//
//	data/{spot|futures/um}/{monthly|daily}/klines/<SYMBOL>/<interval>/<SYMBOL>-<interval>-<period>.zip
//
// with a <file>.CHECKSUM ("<sha256 hex>  <file name>") beside each zip,
// and the listing the archive's bucket answers (S3 ListObjects v1:
// GET /?prefix=...&delimiter=/, CommonPrefixes and Contents, paged with
// IsTruncated and NextMarker). Files are built on request from a
// deterministic price model, so a tree of any size costs no disk: an
// Archive is an http.Handler for an httptest server, and the exchange
// simulator mounts one (e2e/exchangesim) for benchmarks.
//
// Quirks reproduced: spot open times in microseconds from 2025-01-01 on
// (milliseconds before), a header row in futures files from a given
// month on (none in spot files), a file whose .CHECKSUM is wrong, candles
// missing from a series (a gap), and delisted symbols that stay in the
// listing with files up to their last day.
package archivetest

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/marketscreener/market/domain"
)

// MicrosFrom is when spot files switch to microsecond open times.
var MicrosFrom = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Span is a half-open time range [From, To).
type Span struct{ From, To time.Time }

// Symbol is one symbol of the archive and its quirks.
type Symbol struct {
	// Market is "spot" or "futures/um".
	Market string
	// Name is the exchange's name (BTCUSDT).
	Name string
	// From is its first candle (files start with that month); Until is
	// after its last candle: zero means still listed (files up to the
	// day before Archive.Now), else the symbol was delisted then.
	From, Until time.Time
	// HeaderFrom (futures) puts a header row in the files starting on or
	// after it; zero: no header.
	HeaderFrom time.Time
	// Gaps are candles missing from the files.
	Gaps []Span
	// BadChecksum lists the file names (BTCUSDT-1d-2024-12.zip) whose
	// .CHECKSUM does not match the file.
	BadChecksum []string
}

// Archive is a generated archive.
type Archive struct {
	// Now is the archive's today: months before Now's month have monthly
	// files, Now's month daily files up to the day before.
	Now time.Time
	// DailyMonths is how many months before Now's also have daily files
	// (the real archive has them for every month; 0 keeps a big tree's
	// listing short).
	DailyMonths int
	// Intervals are the kline intervals served (1d, 4h, 1h, ...).
	Intervals []domain.Timeframe
	Symbols   []Symbol
	// PageSize is the listing's page (S3: 1,000).
	PageSize int

	sums sync.Map // key -> sha256 hex of the generated zip
}

// Small is the tree of the tests: Now is 2025-02-15, spot BTCUSDT and
// ETHUSDT from 2024-11 (ms) through 2025-01 (µs) to the daily files of
// 2025-02 (and of 2025-01); ETHUSDT misses 2024-12-10 to 2024-12-12 in
// every interval (a gap); LUNAUSDT was delisted on 2024-12-20; BTCUSDT's
// 1d file of 2024-12 has a wrong .CHECKSUM; futures/um BTCUSDT has a
// header row from 2025-01.
func Small() *Archive {
	month := func(y int, m time.Month) time.Time { return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC) }
	day := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, time.UTC) }
	return &Archive{
		Now:         day(2025, 2, 15),
		DailyMonths: 1,
		Intervals:   []domain.Timeframe{domain.TF1d, domain.TF4h, domain.TF1h},
		PageSize:    2,
		Symbols: []Symbol{
			{Market: "spot", Name: "BTCUSDT", From: month(2024, 11), BadChecksum: []string{"BTCUSDT-1d-2024-12.zip"}},
			{Market: "spot", Name: "ETHUSDT", From: month(2024, 11), Gaps: []Span{{day(2024, 12, 10), day(2024, 12, 13)}}},
			{Market: "spot", Name: "LUNAUSDT", From: month(2024, 11), Until: day(2024, 12, 20)},
			{Market: "futures/um", Name: "BTCUSDT", From: month(2024, 11), HeaderFrom: month(2025, 1)},
		},
	}
}

// Universe is a bench tree: every name a spot symbol from from to now,
// one in ten delisted partway (at a month start between from and now).
func Universe(names []string, from, now time.Time, intervals []domain.Timeframe) *Archive {
	a := &Archive{Now: now, Intervals: intervals, PageSize: 1000}
	months := monthsBetween(from, now)
	for i, n := range names {
		s := Symbol{Market: "spot", Name: n, From: from}
		if i%10 == 9 && months > 2 {
			s.Until = from.AddDate(0, 1+int(hashOf(n)%uint64(months-2)), 0)
		}
		a.Symbols = append(a.Symbols, s)
	}
	return a
}

func monthsBetween(from, to time.Time) int {
	return (to.Year()-from.Year())*12 + int(to.Month()-from.Month())
}

// File is one file of the tree.
type File struct {
	Symbol   *Symbol
	Interval domain.Timeframe
	Daily    bool
	Start    time.Time
	Period   string
}

// Key is the file's key in the archive.
func (f File) Key() string {
	freq := "monthly"
	if f.Daily {
		freq = "daily"
	}
	return "data/" + f.Symbol.Market + "/" + freq + "/klines/" + f.Symbol.Name + "/" + string(f.Interval) + "/" + f.name()
}

func (f File) name() string {
	return f.Symbol.Name + "-" + string(f.Interval) + "-" + f.Period + ".zip"
}

func (f File) end() time.Time {
	if f.Daily {
		return f.Start.AddDate(0, 0, 1)
	}
	return f.Start.AddDate(0, 1, 0)
}

// Files lists the files of a symbol's series, oldest first.
func (a *Archive) Files(s *Symbol, tf domain.Timeframe) []File {
	today := a.Now.UTC().Truncate(24 * time.Hour)
	thisMonth := time.Date(today.Year(), today.Month(), 1, 0, 0, 0, 0, time.UTC)
	dailyFrom := thisMonth.AddDate(0, -a.DailyMonths, 0)
	last := today
	if !s.Until.IsZero() && s.Until.Before(last) {
		last = s.Until
	}
	var out []File
	for m := time.Date(s.From.Year(), s.From.Month(), 1, 0, 0, 0, 0, time.UTC); m.Before(last); m = m.AddDate(0, 1, 0) {
		if m.Before(thisMonth) {
			out = append(out, File{Symbol: s, Interval: tf, Start: m, Period: m.Format("2006-01")})
		}
		if m.Before(dailyFrom) {
			continue
		}
		for d := m; d.Before(m.AddDate(0, 1, 0)) && d.Before(last); d = d.AddDate(0, 0, 1) {
			if !d.Before(s.From) {
				out = append(out, File{Symbol: s, Interval: tf, Daily: true, Start: d, Period: d.Format("2006-01-02")})
			}
		}
	}
	return out
}

// Candles are the candles of s in [from, to), as the files hold them
// (prices parsed back from their 8-decimal text).
func (a *Archive) Candles(s *Symbol, tf domain.Timeframe, from, to time.Time) []domain.Candle {
	var out []domain.Candle
	a.rows(s, tf, from, to, func(t time.Time, v [5]string) {
		c := domain.Candle{Time: t}
		for i, dst := range []*float64{&c.Open, &c.High, &c.Low, &c.Close, &c.Volume} {
			*dst, _ = strconv.ParseFloat(v[i], 64)
		}
		out = append(out, c)
	})
	return out
}

// rows calls row for every candle of s in [from, to): open time and the
// open, high, low, close and volume texts.
func (a *Archive) rows(s *Symbol, tf domain.Timeframe, from, to time.Time, row func(time.Time, [5]string)) {
	d := tf.Duration()
	if from.Before(s.From) {
		from = s.From
	}
	if !s.Until.IsZero() && s.Until.Before(to) {
		to = s.Until
	}
	h := hashOf(s.Market + "/" + s.Name)
	base := math.Pow(10, float64(h%5)-1) * (1 + float64(h>>8%100)/100)
	ph := func(k uint64) float64 { return 2 * math.Pi * float64((h>>k)%1000) / 1000 }
	price := func(t time.Time) float64 {
		days := float64(t.Unix()) / 86400
		return base * math.Exp(0.5*math.Sin(2*math.Pi*days/400+ph(3))+0.2*math.Sin(2*math.Pi*days/37+ph(13))+0.05*math.Sin(2*math.Pi*days/3.1+ph(23)))
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 8, 64) }
	for t := tf.Truncate(from); t.Before(to); t = t.Add(d) {
		if t.Before(from) || slices.ContainsFunc(s.Gaps, func(g Span) bool { return !t.Before(g.From) && t.Before(g.To) }) {
			continue
		}
		noise := float64(hashOf(fmt.Sprint(h, t.Unix()))%1000) / 1e5
		o, c := price(t), price(t.Add(d))
		hi, lo := math.Max(o, c)*(1.002+noise), math.Min(o, c)*(0.998-noise)
		row(t, [5]string{f(o), f(hi), f(lo), f(c), f(1000 * (1 + 100*noise))})
	}
}

const futuresHeader = "open_time,open,high,low,close,volume,close_time,quote_volume,count,taker_buy_volume,taker_buy_quote_volume,ignore\n"

// csv is the file's CSV text.
func (a *Archive) csv(f File) []byte {
	var b bytes.Buffer
	if f.Symbol.Market != "spot" && !f.Symbol.HeaderFrom.IsZero() && !f.Start.Before(f.Symbol.HeaderFrom) {
		b.WriteString(futuresHeader)
	}
	micros := f.Symbol.Market == "spot" && !f.Start.Before(MicrosFrom)
	d := f.Interval.Duration()
	a.rows(f.Symbol, f.Interval, f.Start, f.end(), func(t time.Time, v [5]string) {
		open, closeAt := t.UnixMilli(), t.Add(d).UnixMilli()-1
		if micros {
			open, closeAt = t.UnixMicro(), t.Add(d).UnixMicro()-1
		}
		fmt.Fprintf(&b, "%d,%s,%s,%s,%s,%s,%d,%s,%d,%s,%s,0\n", open, v[0], v[1], v[2], v[3], v[4], closeAt, v[4], 100, v[4], v[4])
	})
	return b.Bytes()
}

// Zip is the file's zip: one CSV of the same name, deterministic bytes.
func (a *Archive) Zip(f File) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: strings.TrimSuffix(f.name(), ".zip") + ".csv", Method: zip.Deflate, Modified: f.end()})
	if err == nil {
		_, err = w.Write(a.csv(f))
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		panic(err) // writing to memory
	}
	return b.Bytes()
}

// checksum is the .CHECKSUM text of f, wrong for a BadChecksum period.
func (a *Archive) checksum(f File) string {
	sum, ok := a.sums.Load(f.Key())
	if !ok {
		h := sha256.Sum256(a.Zip(f))
		sum, _ = a.sums.LoadOrStore(f.Key(), hex.EncodeToString(h[:]))
	}
	s := sum.(string)
	if slices.Contains(f.Symbol.BadChecksum, f.name()) {
		s = strings.Repeat("0", len(s))
	}
	return s + "  " + f.name() + "\n"
}

// ServeHTTP serves the listing (GET /?prefix=...&delimiter=/) and the
// files (GET /data/...).
func (a *Archive) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == "/" || r.URL.Path == "" {
		a.serveListing(w, r)
		return
	}
	key := strings.TrimPrefix(r.URL.Path, "/")
	isSum := strings.HasSuffix(key, ".CHECKSUM")
	f, ok := a.lookup(strings.TrimSuffix(key, ".CHECKSUM"))
	if !ok {
		http.Error(w, "<Error><Code>NoSuchKey</Code></Error>", http.StatusNotFound)
		return
	}
	if isSum {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(a.checksum(f)))
		return
	}
	w.Header().Set("Content-Type", "application/zip")
	_, _ = w.Write(a.Zip(f))
}

// lookup finds the file of a zip key.
func (a *Archive) lookup(key string) (File, bool) {
	parts := strings.Split(key, "/")
	// data/<market...>/<freq>/klines/<SYMBOL>/<interval>/<file>
	if len(parts) < 7 || parts[0] != "data" || parts[len(parts)-4] != "klines" {
		return File{}, false
	}
	market := strings.Join(parts[1:len(parts)-5], "/")
	for i := range a.Symbols {
		s := &a.Symbols[i]
		if s.Market != market || s.Name != parts[len(parts)-3] {
			continue
		}
		tf := domain.Timeframe(parts[len(parts)-2])
		if !slices.Contains(a.Intervals, tf) {
			return File{}, false
		}
		for _, f := range a.Files(s, tf) {
			if f.Key() == key {
				return f, true
			}
		}
	}
	return File{}, false
}

type listBucketResult struct {
	XMLName        xml.Name       `xml:"ListBucketResult"`
	Name           string         `xml:"Name"`
	Prefix         string         `xml:"Prefix"`
	Marker         string         `xml:"Marker"`
	NextMarker     string         `xml:"NextMarker,omitempty"`
	MaxKeys        int            `xml:"MaxKeys"`
	Delimiter      string         `xml:"Delimiter"`
	IsTruncated    bool           `xml:"IsTruncated"`
	Contents       []listContent  `xml:"Contents"`
	CommonPrefixes []commonPrefix `xml:"CommonPrefixes"`
}

type listContent struct {
	Key  string `xml:"Key"`
	Size int    `xml:"Size"`
}

type commonPrefix struct {
	Prefix string `xml:"Prefix"`
}

// serveListing answers a ListObjects request: the entries directly under
// prefix after marker, a page at a time.
func (a *Archive) serveListing(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	prefix, marker := q.Get("prefix"), q.Get("marker")
	if q.Get("delimiter") != "/" {
		http.Error(w, "this archive lists with delimiter=/ only", http.StatusBadRequest)
		return
	}
	entries := a.children(prefix)
	slices.Sort(entries)
	entries = slices.Compact(entries)
	i, _ := slices.BinarySearch(entries, marker)
	if i < len(entries) && entries[i] == marker {
		i++
	}
	page := max(a.PageSize, 1)
	res := listBucketResult{Name: "data.binance.vision", Prefix: prefix, Marker: marker, MaxKeys: page, Delimiter: "/"}
	end := min(len(entries), i+page)
	for _, e := range entries[i:end] {
		if strings.HasSuffix(e, "/") {
			res.CommonPrefixes = append(res.CommonPrefixes, commonPrefix{e})
		} else {
			res.Contents = append(res.Contents, listContent{Key: e})
		}
	}
	if end < len(entries) {
		res.IsTruncated, res.NextMarker = true, entries[end-1]
	}
	w.Header().Set("Content-Type", "application/xml")
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(res)
}

// children are the keys and sub-directories directly under prefix.
func (a *Archive) children(prefix string) []string {
	var out []string
	for i := range a.Symbols {
		s := &a.Symbols[i]
		for _, freq := range []string{"monthly", "daily"} {
			root := "data/" + s.Market + "/" + freq + "/klines/"
			if !strings.HasPrefix(root+s.Name+"/", prefix) && !strings.HasPrefix(prefix, root+s.Name+"/") {
				continue
			}
			for _, tf := range a.Intervals {
				for _, f := range a.Files(s, tf) {
					if f.Daily != (freq == "daily") {
						continue
					}
					for _, key := range []string{f.Key(), f.Key() + ".CHECKSUM"} {
						if rest, ok := strings.CutPrefix(key, prefix); ok {
							if j := strings.IndexByte(rest, '/'); j >= 0 {
								out = append(out, prefix+rest[:j+1])
							} else {
								out = append(out, key)
							}
						}
					}
					if !strings.HasPrefix(prefix, root+s.Name+"/"+string(tf)+"/") {
						break // one file is enough to show the directory
					}
				}
			}
		}
	}
	return out
}

func hashOf(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}
