package redistest

import (
	"bytes"
	"strings"
	"sync"
)

// LogBuffer collects log lines written from several goroutines (a
// slog handler's writer), for tests that count what a fault logged.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Count is how many times substr occurs in what was written.
func (b *LogBuffer) Count(substr string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), substr)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
