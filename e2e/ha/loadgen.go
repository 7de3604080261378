package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// loadPaths are the requests of the load: the quota ledger and the rate
// window (/usage), a screener and candles (the read replica).
var loadPaths = []string{"/usage", "/screener/crypto/binance/spot", "/ohlcv/crypto/binance/BTC_USDT/1h?limit=5"}

// phaseStats is what the load generator saw of the requests of one phase.
type phaseStats struct {
	Phase     string         `json:"phase"`
	OK        int64          `json:"ok"`
	Failed    int64          `json:"failed"`
	FirstFail time.Time      `json:"first_fail,omitzero"`
	LastFail  time.Time      `json:"last_fail,omitzero"`
	Codes     map[string]int `json:"codes,omitempty"`
	// ByPath counts the non-2xx per request path: /usage reads the quota
	// ledger on the primary, the others are the read replica's.
	ByPath   map[string]int `json:"by_path,omitempty"`
	Examples []string       `json:"examples,omitempty"`
}

// report is what the streams and the webhook receiver got over the run.
type report struct {
	StreamIDs     [][]string     `json:"stream_ids"`
	StreamResyncs []int          `json:"stream_resyncs"`
	StreamDups    []int          `json:"stream_dups"`
	Reconnects    []int          `json:"reconnects"`
	Webhooks      map[string]int `json:"webhooks"`
}

type loadgen struct {
	base, key string
	mu        sync.Mutex
	cur       phaseStats

	smu        sync.Mutex
	streamIDs  [][]string
	streamSeen []map[string]bool
	resyncs    []int
	dups       []int
	reconnects []int

	wmu      sync.Mutex
	webhooks map[string]int
}

func (g *loadgen) record(path string, status int, detail string) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if status/100 == 2 {
		g.cur.OK++
		return
	}
	g.cur.Failed++
	if g.cur.FirstFail.IsZero() {
		g.cur.FirstFail = now
	}
	g.cur.LastFail = now
	code := fmt.Sprint(status)
	if status == 0 {
		code = "transport"
	}
	if g.cur.Codes == nil {
		g.cur.Codes = map[string]int{}
	}
	g.cur.Codes[code]++
	if g.cur.ByPath == nil {
		g.cur.ByPath = map[string]int{}
	}
	g.cur.ByPath[strings.SplitN(path, "?", 2)[0]]++
	if len(g.cur.Examples) < 5 {
		g.cur.Examples = append(g.cur.Examples, now.Format("15:04:05.000")+" "+detail)
	}
}

func runLoadgen(args []string) error {
	fs := flag.NewFlagSet("loadgen", flag.ExitOnError)
	base := fs.String("base", "", "the api's public base URL (through HAProxy)")
	key := fs.String("key", "", "API key")
	dir := fs.String("dir", "", "where the webhook receiver's certificate is (cert.pem, key.pem)")
	conns := fs.Int("conns", 8, "request loops")
	streams := fs.Int("streams", 4, "event streams held")
	_ = fs.Parse(args)
	g := &loadgen{base: *base, key: *key, webhooks: map[string]int{}}

	// The webhook receiver (TLS: webhooks go to https endpoints).
	rcv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.Header.Get("X-Webhook-Id")
		g.wmu.Lock()
		g.webhooks[id]++
		g.wmu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	rcv.Listener = l
	cert, err := tls.LoadX509KeyPair(filepath.Join(*dir, "cert.pem"), filepath.Join(*dir, "key.pem"))
	if err != nil {
		return err
	}
	rcv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	rcv.StartTLS()
	defer rcv.Close()
	// The subscription, through HAProxy.
	body, _ := json.Marshal(map[string]any{"callback_url": rcv.URL + "/hook", "market": "crypto"})
	req, _ := http.NewRequest(http.MethodPost, g.base+"/webhooks", bytes.NewReader(body))
	req.Header.Set("X-API-Key", g.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("subscribe: %d %s", resp.StatusCode, b)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for i := range *conns {
		wg.Go(func() {
			for n := i; ctx.Err() == nil; n++ {
				p := loadPaths[n%len(loadPaths)]
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.base+p, nil)
				req.Header.Set("X-API-Key", g.key)
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						g.record(p, 0, p+": "+err.Error())
					}
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					g.record(p, resp.StatusCode, p+": "+strings.TrimSpace(string(b[:min(len(b), 200)])))
				} else {
					g.record(p, resp.StatusCode, "")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	g.streamIDs = make([][]string, *streams)
	g.streamSeen = make([]map[string]bool, *streams)
	g.resyncs, g.dups, g.reconnects = make([]int, *streams), make([]int, *streams), make([]int, *streams)
	for i := range *streams {
		g.streamSeen[i] = map[string]bool{}
		wg.Go(func() { g.holdStream(ctx, i) })
	}
	fmt.Println("ready")

	sc := bufio.NewScanner(os.Stdin)
	enc := json.NewEncoder(os.Stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "mark": // ends the current phase, starts the next
			g.mu.Lock()
			out := g.cur
			g.cur = phaseStats{Phase: strings.Join(f[1:], " ")}
			g.mu.Unlock()
			_ = enc.Encode(out)
		case "report":
			g.smu.Lock()
			g.wmu.Lock()
			r := report{StreamIDs: g.streamIDs, StreamResyncs: g.resyncs, StreamDups: g.dups, Reconnects: g.reconnects, Webhooks: g.webhooks}
			_ = enc.Encode(r)
			g.wmu.Unlock()
			g.smu.Unlock()
		}
	}
	cancel()
	wg.Wait()
	return nil
}

// holdStream keeps one /stream open, resuming with Last-Event-ID after
// every break, and records every verdict event's id.
func (g *loadgen) holdStream(ctx context.Context, i int) {
	last := ""
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{}}}
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.base+"/stream?events=verdict_changed&market=crypto", nil)
		req.Header.Set("X-API-Key", g.key)
		if last != "" {
			req.Header.Set("Last-Event-ID", last)
		}
		resp, err := client.Do(req)
		if err == nil && resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if err != nil {
			g.smu.Lock()
			g.reconnects[i]++
			g.smu.Unlock()
			time.Sleep(500 * time.Millisecond)
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var id, event, data string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id:"):
				id = strings.TrimSpace(line[3:])
			case strings.HasPrefix(line, "event:"):
				event = strings.TrimSpace(line[6:])
			case strings.HasPrefix(line, "data:"):
				data += strings.TrimSpace(line[5:])
			case line == "":
				g.smu.Lock()
				switch event {
				case "verdict_changed":
					// The payload's id is the verdict event's (the webhook's X-Webhook-Id).
					var ev struct {
						ID string `json:"id"`
					}
					_ = json.Unmarshal([]byte(data), &ev)
					if g.streamSeen[i][ev.ID] {
						g.dups[i]++
					} else {
						g.streamSeen[i][ev.ID] = true
						g.streamIDs[i] = append(g.streamIDs[i], ev.ID)
					}
				case "resync":
					g.resyncs[i]++
				}
				g.smu.Unlock()
				if id != "" {
					last = id
				}
				id, event, data = "", "", ""
			}
		}
		resp.Body.Close()
		g.smu.Lock()
		g.reconnects[i]++
		g.smu.Unlock()
		time.Sleep(200 * time.Millisecond)
	}
}
