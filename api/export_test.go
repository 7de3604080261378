package api

// DisableFastPath sends every request of s through huma (before s serves).
func DisableFastPath(s *Server) { s.fast = nil }

// FastServed is how many requests the fast path answered, and how many it
// handed to huma after asking the gate.
func FastServed(s *Server) (served, fellBack int64) {
	return s.fast.served.Load(), s.fast.fellBack.Load()
}
