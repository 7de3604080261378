package feeds

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/marketscreener/market/domain"
)

// Binance's public data archive (https://data.binance.vision), as its
// README documents it (https://github.com/binance/binance-public-data,
// "Where do I access it" and "Klines"): files
//
//	data/{spot|futures/um}/{monthly|daily}/klines/<SYMBOL>/<interval>/<SYMBOL>-<interval>-<YYYY-MM[-DD]>.zip
//
// each a zip of one CSV of the klines endpoint's rows (open time, open,
// high, low, close, volume, close time, ...) next to a
// <file>.CHECKSUM holding "<sha256 hex>  <file name>". Daily files come out
// the next day, a month's file early the next month. The quirks: spot
// timestamps are microseconds from 2025-01-01 on (milliseconds before);
// USDⓈ-M futures files gained a header row partway through their history
// (spot files have none); files may be replaced later; symbols stay in the
// listing after a delisting.
//
// The listing is the archive bucket's S3 ListObjects answer (the index
// page of data.binance.vision reads it): GET <base>/?prefix=<p>&delimiter=/
// returns the "directories" under p as CommonPrefixes and the files as
// Contents, 1,000 entries a page (IsTruncated, then marker=NextMarker).
// The default base is the bucket's path-style URL, which serves both the
// listing and the files; a mirror or a local copy (archivetest) serves the
// same two requests.
const archiveDefaultURL = "https://s3-ap-northeast-1.amazonaws.com/data.binance.vision"

// ErrArchiveChecksum marks an archive file whose SHA-256 is not the one
// its .CHECKSUM states (or that has no .CHECKSUM): it is refused.
var ErrArchiveChecksum = errors.New("checksum mismatch")

// ArchiveTimeframes are the timeframes whose archive interval has the
// same name as the domain's.
func archiveInterval(tf domain.Timeframe) (string, bool) {
	switch tf {
	case domain.TF1m, domain.TF5m, domain.TF15m, domain.TF30m, domain.TF1h, domain.TF4h, domain.TF1d, domain.TF1w:
		return string(tf), true
	}
	return "", false
}

// ArchiveMarketPath is the archive's directory of an instrument: spot,
// or futures/um for the USDⓈ-M perpetuals; ok is false for the others.
func ArchiveMarketPath(instrument string) (string, bool) {
	switch instrument {
	case "spot":
		return "spot", true
	case "perpetual":
		return "futures/um", true
	}
	return "", false
}

// BinanceArchive reads the archive under BaseURL (no trailing slash).
type BinanceArchive struct {
	BaseURL string
	HTTP    *http.Client
}

// NewBinanceArchive is the archive at the binance-archive host of cfg.
func NewBinanceArchive(cfg Config, client *http.Client) *BinanceArchive {
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Minute}
	}
	return &BinanceArchive{BaseURL: cfg.BaseURL(HostBinanceArchive), HTTP: client}
}

// ArchiveSymbol is one symbol of the archive's listing: the exchange's
// name (BTCUSDT) and the canonical one (BTC_USDT).
type ArchiveSymbol struct {
	Exchange, Symbol string
}

// ArchiveFile is one kline file of a series: its key in the archive and
// the period it covers, [Start, End).
type ArchiveFile struct {
	Key        string
	Period     string // 2021-01 or 2025-02-03
	Daily      bool
	Start, End time.Time
}

// Symbols lists the symbols of an instrument's archive, delisted ones
// included: those with monthly files and those with daily files only (a
// symbol listed this month). A name with no known quote asset is skipped
// and counted in unknown.
func (a *BinanceArchive) Symbols(ctx context.Context, marketPath string) (syms []ArchiveSymbol, unknown []string, err error) {
	seen := map[string]bool{}
	for _, freq := range []string{"monthly", "daily"} {
		prefix := "data/" + marketPath + "/" + freq + "/klines/"
		dirs, _, err := a.list(ctx, prefix)
		if err != nil {
			return nil, nil, err
		}
		for _, d := range dirs {
			name := strings.TrimSuffix(strings.TrimPrefix(d, prefix), "/")
			if name == "" || seen[name] {
				continue
			}
			seen[name] = true
			canon, ok := splitConcatSymbol(name)
			if !ok {
				unknown = append(unknown, name)
				continue
			}
			syms = append(syms, ArchiveSymbol{Exchange: name, Symbol: canon})
		}
	}
	slices.SortFunc(syms, func(x, y ArchiveSymbol) int { return strings.Compare(x.Exchange, y.Exchange) })
	return syms, unknown, nil
}

// Files lists the kline files of one series, monthly and daily, ordered
// by start (a month's file before the daily files of that month).
func (a *BinanceArchive) Files(ctx context.Context, marketPath, exSymbol string, tf domain.Timeframe) ([]ArchiveFile, error) {
	interval, ok := archiveInterval(tf)
	if !ok {
		return nil, fmt.Errorf("feeds: binance archive: no %s interval", tf)
	}
	var out []ArchiveFile
	for _, freq := range []string{"monthly", "daily"} {
		prefix := "data/" + marketPath + "/" + freq + "/klines/" + exSymbol + "/" + interval + "/"
		_, keys, err := a.list(ctx, prefix)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			f, ok := parseArchiveKey(k, exSymbol, interval, freq == "daily")
			if ok {
				out = append(out, f)
			}
		}
	}
	slices.SortFunc(out, func(x, y ArchiveFile) int {
		if c := x.Start.Compare(y.Start); c != 0 {
			return c
		}
		if x.Daily != y.Daily { // 2021-01 before 2021-01-01
			return map[bool]int{false: -1, true: 1}[x.Daily]
		}
		return strings.Compare(x.Key, y.Key)
	})
	return out, nil
}

// parseArchiveKey reads a zip's key: its period from the name.
func parseArchiveKey(key, exSymbol, interval string, daily bool) (ArchiveFile, bool) {
	base := key[strings.LastIndexByte(key, '/')+1:]
	head := exSymbol + "-" + interval + "-"
	if !strings.HasPrefix(base, head) || !strings.HasSuffix(base, ".zip") {
		return ArchiveFile{}, false
	}
	period := strings.TrimSuffix(strings.TrimPrefix(base, head), ".zip")
	f := ArchiveFile{Key: key, Period: period, Daily: daily}
	var err error
	if daily {
		f.Start, err = time.Parse("2006-01-02", period)
		f.End = f.Start.AddDate(0, 0, 1)
	} else {
		f.Start, err = time.Parse("2006-01", period)
		f.End = f.Start.AddDate(0, 1, 0)
	}
	return f, err == nil
}

// s3Listing is the part of an S3 ListObjects (v1) answer read here.
type s3Listing struct {
	IsTruncated    bool   `xml:"IsTruncated"`
	NextMarker     string `xml:"NextMarker"`
	CommonPrefixes []struct {
		Prefix string `xml:"Prefix"`
	} `xml:"CommonPrefixes"`
	Contents []struct {
		Key string `xml:"Key"`
	} `xml:"Contents"`
}

// list returns the sub-directories and the keys directly under prefix,
// every page of them.
func (a *BinanceArchive) list(ctx context.Context, prefix string) (dirs, keys []string, err error) {
	marker := ""
	for page := 0; ; page++ {
		q := url.Values{"prefix": {prefix}, "delimiter": {"/"}}
		if marker != "" {
			q.Set("marker", marker)
		}
		body, err := a.get(ctx, a.BaseURL+"/?"+q.Encode(), 1<<24)
		if err != nil {
			return nil, nil, err
		}
		var l s3Listing
		if err := xml.Unmarshal(body, &l); err != nil {
			return nil, nil, fmt.Errorf("feeds: binance archive: listing %s: %w", prefix, err)
		}
		last := ""
		for _, p := range l.CommonPrefixes {
			dirs, last = append(dirs, p.Prefix), max(last, p.Prefix)
		}
		for _, c := range l.Contents {
			keys, last = append(keys, c.Key), max(last, c.Key)
		}
		if !l.IsTruncated {
			return dirs, keys, nil
		}
		next := l.NextMarker
		if next == "" {
			next = last
		}
		if next == "" || next == marker || page > 10_000 {
			return nil, nil, fmt.Errorf("feeds: binance archive: listing %s: truncated without a next marker", prefix)
		}
		marker = next
	}
}

// Fetch downloads a file and its .CHECKSUM, verifies the SHA-256 and
// parses the klines. A mismatch (or a missing .CHECKSUM) wraps
// ErrArchiveChecksum. sum is the file's SHA-256, hex: a file replaced in
// the archive has a new one.
func (a *BinanceArchive) Fetch(ctx context.Context, f ArchiveFile) (cs []domain.Candle, sum string, err error) {
	want, err := a.get(ctx, a.BaseURL+"/"+f.Key+".CHECKSUM", 4096)
	if err != nil {
		if errors.Is(err, errArchiveNotFound) {
			return nil, "", fmt.Errorf("feeds: binance archive: %s: no .CHECKSUM: %w", f.Key, ErrArchiveChecksum)
		}
		return nil, "", err
	}
	body, err := a.get(ctx, a.BaseURL+"/"+f.Key, 1<<28)
	if err != nil {
		return nil, "", err
	}
	h := sha256.Sum256(body)
	sum = hex.EncodeToString(h[:])
	wantSum, _, _ := strings.Cut(strings.TrimSpace(string(want)), " ")
	if !strings.EqualFold(wantSum, sum) {
		return nil, sum, fmt.Errorf("feeds: binance archive: %s: SHA-256 %s, .CHECKSUM says %s: %w", f.Key, sum, wantSum, ErrArchiveChecksum)
	}
	cs, err = ParseArchiveZip(body)
	if err != nil {
		return nil, sum, fmt.Errorf("feeds: binance archive: %s: %w", f.Key, err)
	}
	return cs, sum, nil
}

var errArchiveNotFound = errors.New("not found")

// get reads url with up to three attempts on a network error or a 5xx.
func (a *BinanceArchive) get(ctx context.Context, u string, limit int64) ([]byte, error) {
	var last error
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(attempt) * time.Second):
			}
		}
		body, retry, err := a.getOnce(ctx, u, limit)
		if err == nil || !retry {
			return body, err
		}
		last = err
	}
	return nil, last
}

func (a *BinanceArchive) getOnce(ctx context.Context, u string, limit int64) (body []byte, retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := a.HTTP.Do(req)
	if err != nil {
		return nil, ctx.Err() == nil, fmt.Errorf("feeds: binance archive: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, false, fmt.Errorf("feeds: binance archive: %s: %w", u, errArchiveNotFound)
	case resp.StatusCode >= 500:
		return nil, true, fmt.Errorf("feeds: binance archive: %s: %s", u, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return nil, false, fmt.Errorf("feeds: binance archive: %s: %s", u, resp.Status)
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, ctx.Err() == nil, fmt.Errorf("feeds: binance archive: %s: %w", u, err)
	}
	if int64(len(body)) > limit {
		return nil, false, fmt.Errorf("feeds: binance archive: %s: larger than %d bytes", u, limit)
	}
	return body, false, nil
}

// ParseArchiveZip parses the CSV files of a kline zip (one in practice).
func ParseArchiveZip(body []byte) ([]domain.Candle, error) {
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		return nil, fmt.Errorf("not a zip: %w", err)
	}
	var out []domain.Candle
	for _, zf := range zr.File {
		if !strings.HasSuffix(zf.Name, ".csv") {
			continue
		}
		r, err := zf.Open()
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(io.LimitReader(r, 1<<30))
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", zf.Name, err)
		}
		cs, err := ParseArchiveKlines(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", zf.Name, err)
		}
		out = append(out, cs...)
	}
	return out, nil
}
