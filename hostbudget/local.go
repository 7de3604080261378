package hostbudget

import (
	"sync"
	"time"
)

// localHost is one host's budget in this process: the Redis scripts'
// algorithm over a map, for when Redis does not answer (or there is none).
type localHost struct {
	mu    sync.Mutex
	until time.Time
	used  map[int64]int // window number → weight booked
}

func (h *localHost) reserve(window, tick time.Duration, capacity caps, weight int, at, horizon time.Time) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := window.Milliseconds()
	current := at.UnixMilli() / w
	for idx := range h.used {
		if idx < current {
			delete(h.used, idx)
		}
	}
	t := at
	if h.until.After(t) {
		t = h.until
	}
	idx := t.UnixMilli() / w
	if t.UnixMilli() >= (idx+1)*w-guard(window).Milliseconds() {
		idx++
		t = time.UnixMilli(idx * w).In(at.Location())
	}
	for !t.After(horizon) {
		c := capacity.window
		if opensTick(idx*w, w, tick.Milliseconds()) {
			c = capacity.tick
		}
		if used := h.used[idx]; c > 0 && (used == 0 || used+weight <= c) {
			if weight > 0 {
				h.used[idx] += weight
			}
			return t, true
		}
		idx++
		t = time.UnixMilli(idx * w).In(at.Location())
	}
	return t, false
}

func (h *localHost) observe(window time.Duration, at time.Time, used int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	idx := at.UnixMilli() / window.Milliseconds()
	if used > h.used[idx] {
		h.used[idx] = used
	}
}

func (h *localHost) ban(end time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if end.After(h.until) {
		h.until = end
	}
}

func (h *localHost) bannedUntil() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.until
}
