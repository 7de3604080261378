package worker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// readChunks yields every chunk's read in the chunks' order, also when a
// later read ends first, with at most parallel under way; a consumer that
// stops early ends the reading.
func TestReadChunksInOrderAndBounded(t *testing.T) {
	t.Parallel()
	chunks := make([][]string, 12)
	for i := range chunks {
		chunks[i] = []string{fmt.Sprint(i)}
	}
	for _, parallel := range []int{1, 4} {
		var mu sync.Mutex
		running, most := 0, 0
		secondStarted := make(chan struct{})
		overlapped := false
		read := func(ctx context.Context, chunk []string) chunkRead {
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			switch chunk[0] {
			case "0":
				if parallel > 1 { // the first read ends after the second has started
					select {
					case <-secondStarted:
						mu.Lock()
						overlapped = true
						mu.Unlock()
					case <-time.After(10 * time.Second): // a guard: the reads were not side by side
					}
				}
			case "1":
				close(secondStarted)
			}
			mu.Lock()
			running--
			mu.Unlock()
			return chunkRead{chunk: chunk}
		}
		ctx, cancel := context.WithCancel(context.Background())
		var got []string
		for r := range readChunks(ctx, chunks, parallel, read) {
			got = append(got, r.chunk[0])
			if len(got) == 6 {
				break
			}
		}
		cancel()
		for i, g := range got {
			if g != fmt.Sprint(i) {
				t.Fatalf("parallel %d: chunks yielded in order %v", parallel, got)
			}
		}
		if len(got) != 6 {
			t.Fatalf("parallel %d: %d chunks yielded, want 6", parallel, len(got))
		}
		mu.Lock()
		if most > parallel || parallel > 1 && !overlapped {
			t.Errorf("parallel %d: %d reads under way at once (side by side: %v)", parallel, most, overlapped)
		}
		mu.Unlock()
	}
}
