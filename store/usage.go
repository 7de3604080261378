package store

import (
	"context"
	"time"

	"github.com/marketscreener/market/domain"
)

// CountRequest records one admitted request of a client in now's calendar
// month (UTC) if its quota allows (nil = unlimited). It is one atomic
// statement, so it is exact across api processes and durable once it
// returns. used is the count including this request when admitted.
func (db *DB) CountRequest(ctx context.Context, clientID string, quota *int64, now time.Time) (used int64, admitted bool, err error) {
	month := domain.Month(now)
	err = db.Pool.QueryRow(ctx, `INSERT INTO usage_months AS u (client_id, month, used)
		SELECT $1, $2, 1 WHERE $3::bigint IS NULL OR $3::bigint >= 1
		ON CONFLICT (client_id, month) DO UPDATE SET used = u.used + 1, updated_at = now()
			WHERE $3::bigint IS NULL OR u.used < $3::bigint
		RETURNING used`, clientID, month, quota).Scan(&used)
	if err == nil {
		return used, true, nil
	}
	used, err2 := db.UsedInMonth(ctx, clientID, now)
	if err2 != nil {
		return 0, false, err2
	}
	return used, false, translateNoRows(err)
}

// UsedInMonth returns the admitted requests of a client in now's month.
func (db *DB) UsedInMonth(ctx context.Context, clientID string, now time.Time) (int64, error) {
	var used int64
	err := db.Pool.QueryRow(ctx, `SELECT coalesce((SELECT used FROM usage_months WHERE client_id = $1 AND month = $2), 0)`,
		clientID, domain.Month(now)).Scan(&used)
	return used, translate(err, "usage")
}
