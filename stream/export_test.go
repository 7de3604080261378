package stream

// Reads is how many queries of the log the hub made.
func (h *Hub) Reads() int64 { return h.reads.Load() }

// Turns is how many rounds the hub's loop made (each wake-up or timer).
func (h *Hub) Turns() int64 { return h.turns.Load() }

// Wake asks the hub to read now (what a commit's notification does).
func (h *Hub) Wake() { h.poke() }

// RefreshNow refreshes every lease of s at once, as its loop does every
// third of the TTL.
func (s *Slots) RefreshNow() { s.refreshAll() }
