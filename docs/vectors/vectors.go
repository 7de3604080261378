// Package vectors holds the published test vectors of every version of
// the scoring method (one folder per analytics.Versions name, described in
// README.md) and serves their methodology.json: how an earlier version's
// rules stay listed once the engine runs a newer one.
package vectors

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"

	"github.com/marketscreener/market/domain/analytics"
)

//go:embed */methodology.json
var published embed.FS

// Published returns the methodology published with each version, by
// version name.
func Published() (map[string]analytics.Method, error) {
	names, err := fs.Glob(published, "*/methodology.json")
	if err != nil {
		return nil, fmt.Errorf("vectors: %w", err)
	}
	out := make(map[string]analytics.Method, len(names))
	for _, name := range names {
		b, err := published.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("vectors: %w", err)
		}
		var m analytics.Method
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("vectors: %s: %w", name, err)
		}
		out[path.Dir(name)] = m
	}
	return out, nil
}
