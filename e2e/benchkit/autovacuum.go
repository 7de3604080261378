package benchkit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AutovacuumCounts is what Autovacuum did: the tables it vacuumed and
// analyzed, and the time its workers spent doing it.
type AutovacuumCounts struct {
	Emulated          bool // false: the server's own autovacuum runs
	Vacuums, Analyzes int64
	Busy              time.Duration
	LastError         string
}

func (c AutovacuumCounts) String() string {
	if !c.Emulated {
		return "the server's autovacuum"
	}
	s := fmt.Sprintf("emulated (the server's is off): %d vacuums, %d analyzes, workers busy %s", c.Vacuums, c.Analyzes,
		c.Busy.Round(time.Second))
	if c.LastError != "" {
		s += ", last error: " + c.LastError
	}
	return s
}

// Autovacuum does for the tables of one schema what PostgreSQL's
// autovacuum does with its default settings, when the server runs without
// it (this project's CI server sets autovacuum = off): a deployment has it
// on, and a benchmark of a deployment without it measures plans made on
// no statistics and tables bloated by every update. Every naptime (1 min)
// it vacuums a table whose dead rows exceed 50 + 20 % of its rows, or
// whose inserts since the last vacuum exceed 1,000 + 20 %, and analyzes one
// whose changes since the last analyze exceed 50 + 10 %, on up to three
// workers, each throttled as autovacuum is (vacuum_cost_delay 2 ms,
// vacuum_cost_limit 200). When the server's autovacuum is on it does
// nothing. stop ends it and returns what it did.
func Autovacuum(ctx context.Context, databaseURL, schema string) (stop func() AutovacuumCounts, err error) {
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return nil, err
	}
	var on string
	if err := pool.QueryRow(ctx, "SHOW autovacuum").Scan(&on); err != nil {
		pool.Close()
		return nil, err
	}
	if on == "on" {
		pool.Close()
		return func() AutovacuumCounts { return AutovacuumCounts{} }, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	var (
		mu      sync.Mutex
		counts  = AutovacuumCounts{Emulated: true}
		busy    = map[string]bool{}
		workers = make(chan struct{}, 3) // autovacuum_max_workers
		wg      sync.WaitGroup
	)
	work := func(table string, vacuum, analyze bool) {
		defer wg.Done()
		defer func() { <-workers }()
		defer func() { mu.Lock(); delete(busy, table); mu.Unlock() }()
		t0 := time.Now()
		err := pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
			if _, err := c.Exec(ctx, "SET vacuum_cost_delay = '2ms'; SET vacuum_cost_limit = 200"); err != nil {
				return err
			}
			stmt := "ANALYZE " + pgx.Identifier{schema, table}.Sanitize()
			if vacuum {
				stmt = "VACUUM " + pgx.Identifier{schema, table}.Sanitize()
				if analyze {
					stmt = "VACUUM (ANALYZE) " + pgx.Identifier{schema, table}.Sanitize()
				}
			}
			_, err := c.Exec(ctx, stmt)
			return err
		})
		mu.Lock()
		defer mu.Unlock()
		counts.Busy += time.Since(t0)
		if err != nil {
			if ctx.Err() == nil {
				counts.LastError = err.Error()
			}
			return
		}
		if vacuum {
			counts.Vacuums++
		}
		if analyze {
			counts.Analyzes++
		}
	}
	round := func() {
		rows, err := pool.Query(ctx, `SELECT s.relname, s.n_dead_tup > 50 + 0.2 * greatest(c.reltuples, 0)
				OR s.n_ins_since_vacuum > 1000 + 0.2 * greatest(c.reltuples, 0),
				s.n_mod_since_analyze > 50 + 0.1 * greatest(c.reltuples, 0)
			FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
			WHERE s.schemaname = $1 ORDER BY s.n_dead_tup + s.n_mod_since_analyze DESC`, schema)
		if err != nil {
			return
		}
		type due struct {
			table           string
			vacuum, analyze bool
		}
		var list []due
		for rows.Next() {
			var d due
			if rows.Scan(&d.table, &d.vacuum, &d.analyze) == nil && (d.vacuum || d.analyze) {
				list = append(list, d)
			}
		}
		rows.Close()
		for _, d := range list {
			mu.Lock()
			skip := busy[d.table]
			mu.Unlock()
			if skip {
				continue
			}
			select {
			case workers <- struct{}{}:
			default:
				return // every worker busy: the rest wait for the next naptime
			}
			mu.Lock()
			busy[d.table] = true
			mu.Unlock()
			wg.Add(1)
			go work(d.table, d.vacuum, d.analyze)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Minute) // autovacuum_naptime
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				round()
			}
		}
	}()
	return func() AutovacuumCounts {
		cancel()
		<-done
		wg.Wait()
		pool.Close()
		mu.Lock()
		defer mu.Unlock()
		return counts
	}, nil
}
