package exchangesim

import (
	"bufio"
	"encoding/json"
	"net/http"
	"time"
)

// stream serves GET /v3/accounts/{accountID}/pricing/stream as the v20
// docs describe it (oanda/v20-openapi, streamPricing): chunked transfer
// encoding, one Price or PricingHeartbeat object a line; a snapshot of
// every instrument first (unless snapshot=false); then each instrument's
// price when it changes, looked for every PriceEvery (OANDA: at most one
// per 250 ms window); a heartbeat every HeartbeatEvery (5 s). While the
// market is closed the prices do not change: heartbeats alone, after one
// non-tradeable price of every instrument at the close. At most MaxStreams
// streams per IP are open; one more is refused.
func (o *oandaSim) stream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	pairs, msg := o.pairsOf(q.Get("instruments"))
	if msg != "" {
		oandaError(w, http.StatusBadRequest, msg)
		return
	}
	snapshot := q.Get("snapshot") != "false"
	ip := clientIP(r)
	o.mu.Lock()
	if o.streamsOpen[ip] >= o.cfg.MaxStreams {
		o.stats.Streams.Refused++
		o.mu.Unlock()
		oandaError(w, http.StatusTooManyRequests, "Too many active streams")
		return
	}
	o.streamsOpen[ip]++
	o.stats.Streams.Accepted++
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.streamsOpen[ip]--
		o.mu.Unlock()
	}()

	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw) // one object a line
	unix := r.Header.Get("Accept-Datetime-Format") == "UNIX"
	flush := func() bool {
		if err := bw.Flush(); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	type sent struct {
		at        time.Time
		tradeable bool
	}
	last := make([]sent, len(pairs))
	send := func(all bool) int {
		now := o.now()
		tradeable := !o.market.closed(now)
		n := 0
		for i, p := range pairs {
			qt := o.market.quoteTime(p, now)
			if !all && qt.Equal(last[i].at) && tradeable == last[i].tradeable {
				continue
			}
			last[i] = sent{qt, tradeable}
			_ = enc.Encode(o.price(p, now, unix))
			n++
		}
		return n
	}
	counted := func(prices, heartbeats int) {
		o.count(func(s *OandaStats) { s.Streams.Prices += int64(prices); s.Streams.Heartbeats += int64(heartbeats) })
	}
	if snapshot {
		counted(send(true), 0)
	} else {
		send(true) // the state the next changes are measured against
		bw.Reset(w)
	}
	if !flush() {
		return
	}
	heartbeat := time.NewTicker(o.cfg.HeartbeatEvery)
	defer heartbeat.Stop()
	tick := time.NewTicker(o.cfg.PriceEvery)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-o.stop:
			return
		case <-heartbeat.C:
			_ = enc.Encode(map[string]string{"type": "HEARTBEAT", "time": fmtOandaTime(o.now(), unix)})
			counted(0, 1)
		case <-tick.C:
			n := send(false)
			if n == 0 {
				continue
			}
			counted(n, 0)
		}
		if !flush() {
			return
		}
	}
}
