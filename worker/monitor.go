package worker

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// MonitorOptions: the asynqmon UI is read-only unless Writable, and a
// writable one needs Token on every request.
type MonitorOptions struct {
	Writable bool
	Token    string
}

// requireToken admits requests carrying token as the basic-auth password
// or a bearer token; the comparison takes the same time whatever it gets.
func requireToken(h http.Handler, token string) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := "", false
		if _, pw, basic := r.BasicAuth(); basic {
			got, ok = pw, true
		} else if b, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); bearer {
			got, ok = b, true
		}
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="asynqmon (writable)", charset="UTF-8"`)
			http.Error(w, "asynqmon is writable: its token (MARKET_ASYNQMON_TOKEN) is required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
