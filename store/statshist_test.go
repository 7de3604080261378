package store_test

import (
	"context"
	"testing"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// TestStatsTotalFollowsTheDays: a stored total is read with the days
// after it only; writing, replacing or deleting a day it covers, or
// truncating the days, deletes it (whoever writes); a day after it leaves
// it; and a total made from a state another run has saved over since is
// not stored.
func TestStatsTotalFollowsTheDays(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	ctx := context.Background()
	const src = "backtest"
	day := func(d int) store.StatsDay {
		return store.StatsDay{Source: src, Day: d, Verdicts: []byte(`{}`), Factors: []byte(`{}`)}
	}
	save := func(gen int64, u store.StatsUpdate) {
		t.Helper()
		u.Method, u.Generation = "m", gen
		if err := db.SaveStatsState(ctx, domain.Crypto, u); err != nil {
			t.Fatal(err)
		}
	}
	// read returns the total's day (-1: none) and the days read after it.
	read := func() (int, []int, int64) {
		t.Helper()
		through := -1
		var days []int
		gen, err := db.EachStatsDaySinceTotal(ctx, domain.Crypto, src, func(tot store.StatsTotal) error {
			through = tot.ThroughDay
			return nil
		}, func(d store.StatsDay) error {
			days = append(days, d.Day)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return through, days, gen
	}
	total := func(through int, gen int64) bool {
		t.Helper()
		saved, err := db.SaveStatsTotal(ctx, domain.Crypto, store.StatsTotal{Source: src, ThroughDay: through,
			Verdicts: []byte(`{"t":1}`), Factors: []byte(`{}`)}, gen)
		if err != nil {
			t.Fatal(err)
		}
		return saved
	}

	save(0, store.StatsUpdate{Days: []store.StatsDay{day(100), day(101), day(102), day(103), day(104)}})
	through, days, gen := read()
	if through != -1 || len(days) != 5 || gen != 1 {
		t.Fatalf("before a total: total %d, days %v, generation %d; want none, 5 days, 1", through, days, gen)
	}
	if !total(102, gen) {
		t.Fatal("a total of the current generation was not stored")
	}
	if through, days, _ = read(); through != 102 || len(days) != 2 || days[0] != 103 {
		t.Fatalf("total %d, days after it %v: want 102 and [103 104]", through, days)
	}
	// A day after the total leaves it.
	save(gen, store.StatsUpdate{Days: []store.StatsDay{day(104), day(105)}})
	if through, days, gen = read(); through != 102 || len(days) != 3 {
		t.Fatalf("after days 104-105 written: total %d, days %v: want 102 and 3 days", through, days)
	}
	// A total made before another run saved is refused.
	if total(104, gen-1) {
		t.Fatal("a total of an older generation was stored")
	}
	for _, c := range []struct {
		what  string
		write string
	}{
		{"a day it covers written", `INSERT INTO stats_days VALUES ('crypto', 'backtest', '1970-04-11', '', '')
			ON CONFLICT (market, source, day) DO UPDATE SET verdicts = excluded.verdicts`}, // day 100
		{"a day it covers inserted", `INSERT INTO stats_days VALUES ('crypto', 'backtest', '1970-04-10', '', '')`}, // day 99
		{"a day it covers moved", `UPDATE stats_days SET day = '1970-05-01' WHERE day = '1970-04-12'`},             // day 101
		{"a day it covers deleted", `DELETE FROM stats_days WHERE day = '1970-04-13'`},                             // day 102
		{"the days truncated", `TRUNCATE stats_days`},
	} {
		if !total(102, gen) {
			t.Fatalf("%s: the total was not stored", c.what)
		}
		if _, err := db.Pool.Exec(ctx, c.write); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if through, _, _ := read(); through != -1 {
			t.Errorf("%s: the total through day %d is still there", c.what, through)
		}
	}
	// Another market's or source's days leave it.
	if !total(102, gen) {
		t.Fatal("the total was not stored")
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO stats_days VALUES ('stocks', 'backtest', '1970-01-02', '', ''), ('crypto', 'live', '1970-01-02', '', '')`); err != nil {
		t.Fatal(err)
	}
	if through, _, _ := read(); through != 102 {
		t.Errorf("another market's or source's day deleted the total (%d)", through)
	}
}
