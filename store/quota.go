package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
)

// The monthly quota's ledger is the row (client, month) of usage_months.
// These are its statements; admission.QuotaLedger batches and leases them
// and states what they guarantee together.

const (
	// ensureUsageRow makes sure the month's row exists for the SELECT ...
	// FOR UPDATE below to lock (a new month or a new client).
	ensureUsageRow = `INSERT INTO usage_months (client_id, month, used) VALUES ($1, $2::date, 0)
ON CONFLICT (client_id, month) DO NOTHING`
	// lockUsageRow reads the count before the batch and holds the row until
	// the batch commits, so the count read is the one the UPDATE starts from.
	lockUsageRow = `SELECT used FROM usage_months WHERE client_id = $1 AND month = $2::date FOR UPDATE`
	// addUsage adds k requests, or as many as the quota still allows; a quota
	// lowered below the count admits none and never lowers the count.
	addUsage = `UPDATE usage_months
SET used = CASE WHEN $3::bigint IS NULL THEN used + $4::bigint
                ELSE LEAST(used + $4::bigint, GREATEST(used, $3::bigint)) END,
    updated_at = now()
WHERE client_id = $1 AND month = $2::date
RETURNING used`
)

// addUsageOne is the whole batch of one run (the usual case: one quota
// value) in ONE statement, so the row lock is held for one statement's
// execution plus the commit instead of three statements'. The subquery
// locks the month's row (FOR UPDATE: under READ COMMITTED it waits for a
// concurrent batch and then reads the committed count), the UPDATE adds k
// requests or as many as the quota still allows, and RETURNING reports the
// count before and after. The first batch of a month (no row yet) inserts
// the row with what it admits; two replicas racing on that insert leave
// one of them with no row returned (ON CONFLICT DO NOTHING), and it simply
// runs the statement again, now updating the row the other inserted.
//
// $1 client, $2 month, $3 quota (NULL: unlimited), $4 k.
const addUsageOne = `WITH upd AS (
  UPDATE usage_months u
  SET used = CASE WHEN $3::bigint IS NULL THEN cur.used + $4::bigint
                  ELSE LEAST(cur.used + $4::bigint, GREATEST(cur.used, $3::bigint)) END,
      updated_at = now()
  FROM (SELECT used FROM usage_months WHERE client_id = $1 AND month = $2::date FOR UPDATE) cur
  WHERE u.client_id = $1 AND u.month = $2::date
  RETURNING cur.used AS before, u.used AS after
), ins AS (
  INSERT INTO usage_months (client_id, month, used)
  SELECT $1, $2::date, CASE WHEN $3::bigint IS NULL THEN $4::bigint ELSE LEAST($4::bigint, GREATEST($3::bigint, 0)) END
  WHERE NOT EXISTS (SELECT 1 FROM upd)
  ON CONFLICT (client_id, month) DO NOTHING
  RETURNING 0::bigint AS before, used AS after
)
SELECT before, after FROM upd UNION ALL SELECT before, after FROM ins`

// AddUsage adds n requests to the month's count of clientID, or as many as
// quota (nil: unlimited) still allows, in one statement and one implicit
// transaction, and returns the count before and after. It creates the
// month's row on the first call.
func (db *DB) AddUsage(ctx context.Context, clientID string, month time.Time, quota *int64, n int64) (before, after int64, err error) {
	for range 3 {
		err = db.Pool.QueryRow(ctx, addUsageOne, clientID, month, quota, n).Scan(&before, &after)
		if !errors.Is(err, pgx.ErrNoRows) {
			break
		}
		// Lost the race to insert the month's row: it exists now.
	}
	if err != nil {
		return 0, 0, translate(err, "usage")
	}
	return before, after, nil
}

// AddUsageRuns adds counts[i] requests with quotas[i], in order, in one
// pipeline whose statements form one implicit transaction. The row lock
// taken by lockUsageRow is held until the last UPDATE commits: before is
// exact, and afters[i] is the count after run i.
func (db *DB) AddUsageRuns(ctx context.Context, clientID string, month time.Time, quotas []*int64, counts []int64) (before int64, afters []int64, err error) {
	if len(quotas) != len(counts) {
		return 0, nil, fmt.Errorf("store: add usage: %d quotas for %d runs", len(quotas), len(counts))
	}
	b := &pgx.Batch{}
	b.Queue(ensureUsageRow, clientID, month)
	b.Queue(lockUsageRow, clientID, month)
	for i := range counts {
		b.Queue(addUsage, clientID, month, quotas[i], counts[i])
	}
	res := db.Pool.SendBatch(ctx, b)
	defer res.Close()
	if _, err := res.Exec(); err != nil {
		return 0, nil, translate(err, "usage")
	}
	if err := res.QueryRow().Scan(&before); err != nil {
		return 0, nil, translate(err, "usage")
	}
	afters = make([]int64, len(counts))
	for i := range counts {
		if err := res.QueryRow().Scan(&afters[i]); err != nil {
			return 0, nil, translate(err, "usage")
		}
	}
	if err := res.Close(); err != nil {
		return 0, nil, translate(err, "usage")
	}
	return before, afters, nil
}

// GiveBackUsage subtracts n requests that were counted ahead (a lease) and
// not served; the count never goes below 0.
func (db *DB) GiveBackUsage(ctx context.Context, clientID string, month time.Time, n int64) error {
	_, err := db.Pool.Exec(ctx, `UPDATE usage_months SET used = GREATEST(used - $3, 0), updated_at = now()
WHERE client_id = $1 AND month = $2::date`, clientID, month, n)
	if err != nil {
		return translate(err, "usage")
	}
	return nil
}

// UsedThisMonth returns how many requests of clientID were admitted in
// now's calendar month (UTC); 0 before the first one.
func (db *DB) UsedThisMonth(ctx context.Context, clientID string, now time.Time) (int64, error) {
	var used int64
	err := db.Pool.QueryRow(ctx, `SELECT used FROM usage_months WHERE client_id = $1 AND month = $2::date`,
		clientID, domain.Month(now)).Scan(&used)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: used this month: %w", err)
	}
	return used, nil
}
