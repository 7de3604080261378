package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/feeds"
)

func TestIngestErrorCategory(t *testing.T) {
	t.Parallel()
	for want, err := range map[string]error{
		"store":           ours(errors.New("store: upsert: conn closed")),
		"timeout":         fmt.Errorf("feeds: binance: GET /x: %w", context.DeadlineExceeded),
		"rate_limited":    &feeds.StatusError{StatusCode: 429},
		"upstream_status": fmt.Errorf("wrapped: %w", &feeds.StatusError{StatusCode: 502}),
		"network":         &net.OpError{Op: "dial", Err: errors.New("connection refused")},
		"invalid_data":    domain.Invalid("candle", 1, "high below low"),
		"no_data":         errors.New("feed returned no tickers"),
		"other":           errors.New("no configured feed serves crypto/nowhere/spot"),
	} {
		if got := IngestErrorCategory(err); got != want {
			t.Errorf("IngestErrorCategory(%v) = %q, want %q", err, got, want)
		}
	}
}
