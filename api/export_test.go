package api

import "time"

// DisableHotDecoders leaves the decoding of every request of s to huma
// (before s serves).
func DisableHotDecoders(s *Server) { s.noHot = true }

// HotDecoded is how many requests a hot route's decoder took.
func HotDecoded(s *Server) int64 { return s.hotDecoded.Load() }

// ScreenFullReloadForTest: how often a screen snapshot checks every
// report it holds.
const ScreenFullReloadForTest = screenFullReload

// WaitScreenRebuilds waits until no screen snapshot of s is being rebuilt
// in the background (a test may then move its clock); false after 10 s.
func WaitScreenRebuilds(s *Server) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		busy := false
		s.screens.mu.Lock()
		for _, h := range s.screens.markets {
			busy = busy || h.refreshing.Load()
		}
		s.screens.mu.Unlock()
		if !busy {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}
