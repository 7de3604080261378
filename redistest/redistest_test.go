package redistest_test

import (
	"context"
	"testing"

	"github.com/marketscreener/market/redistest"
)

func TestPrefixKeysDeletedAtCleanup(t *testing.T) {
	t.Parallel()
	rdb := redistest.Client(t)
	ctx := context.Background()
	var prefix string
	t.Run("user", func(t *testing.T) {
		prefix = redistest.Prefix(t)
		for _, k := range []string{"a", "b", "c"} {
			if err := rdb.Set(ctx, prefix+k, "1", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) != 0 {
		t.Errorf("keys left under %s: %v, %v", prefix, keys, err)
	}
}

func TestIsolatedDB(t *testing.T) {
	t.Parallel()
	rdb := redistest.IsolatedDB(t)
	if n, err := rdb.DBSize(context.Background()).Result(); err != nil || n != 0 {
		t.Errorf("isolated db holds %d keys, %v", n, err)
	}
}
