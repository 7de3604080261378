package api

// DisableHotDecoders leaves the decoding of every request of s to huma
// (before s serves).
func DisableHotDecoders(s *Server) { s.noHot = true }

// HotDecoded is how many requests a hot route's decoder took.
func HotDecoded(s *Server) int64 { return s.hotDecoded.Load() }

// ScreenFullReloadForTest: how often a screen snapshot checks every
// report it holds.
const ScreenFullReloadForTest = screenFullReload
