package storetest

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/marketscreener/market/store"
)

// CPU measures what a benchmark costs in CPU time, on both sides: the
// Postgres backends of a pool and this process. On a shared machine wall
// time swings with the neighbours' load; the CPU time of one's own
// processes moves far less, so two builds compare by it.
type CPU struct {
	pids       []int
	pg, client time.Duration
}

// StartCPU opens every connection of db's pool (so that the benchmark
// uses only backends it knows) and starts counting.
func StartCPU(tb testing.TB, db *store.DB) *CPU {
	tb.Helper()
	ctx := context.Background()
	var conns []*pgxpool.Conn
	c := &CPU{}
	for range db.Pool.Config().MaxConns {
		conn, err := db.Pool.Acquire(ctx)
		if err != nil {
			tb.Fatalf("storetest: acquire: %v", err)
		}
		var pid int
		if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			tb.Fatalf("storetest: backend pid: %v", err)
		}
		conns = append(conns, conn)
		c.pids = append(c.pids, pid)
	}
	for _, conn := range conns {
		conn.Release()
	}
	c.pg, c.client = c.now()
	return c
}

// Used returns the CPU time used since StartCPU by the pool's backends
// (Postgres) and by this process (client: the benchmark and the code it
// drives). Backends that ended since are not counted.
func (c *CPU) Used() (pg, client time.Duration) {
	p, cl := c.now()
	return p - c.pg, cl - c.client
}

func (c *CPU) now() (pg, client time.Duration) {
	for _, pid := range c.pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from the third on
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)      // utime: field 14
			k, _ := strconv.ParseInt(f[12], 10, 64)      // stime: field 15
			pg += time.Duration(u+k) * time.Second / 100 // clock ticks (USER_HZ = 100 on Linux)
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		client = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return pg, client
}
