package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
)

const alertColumns = `a.id::text, a.client_id::text, a.name, a.market, a.expression, a.symbols, a.cooldown_seconds, a.created_at`

func scanAlert(row pgx.CollectableRow) (domain.Alert, error) {
	var a domain.Alert
	var market string
	err := row.Scan(&a.ID, &a.ClientID, &a.Name, &market, &a.Expression, &a.Symbols, &a.CooldownSeconds, &a.CreatedAt)
	a.Market, a.CreatedAt = domain.Market(market), a.CreatedAt.UTC()
	return a, err
}

func notFoundAlert(id string) error {
	return domain.Errorf(domain.ENOTFOUND, "no alert %q", id)
}

// CreateAlert stores a client's alert (a.ID and a.CreatedAt are set
// here). A client holds at most tier.MaxAlerts() alerts (ECONFLICT beyond);
// the client's row serialises concurrent creations, so the cap holds.
func (db *DB) CreateAlert(ctx context.Context, a domain.Alert, tier domain.Tier) (domain.Alert, error) {
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return domain.Alert{}, translate(err, "alert")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	var n int
	if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM alerts WHERE client_id = c.id) FROM clients c WHERE c.id = $1 FOR UPDATE`,
		a.ClientID).Scan(&n); err != nil {
		return domain.Alert{}, translate(err, "client")
	}
	if max := tier.MaxAlerts(); n >= max {
		return domain.Alert{}, domain.Errorf(domain.ECONFLICT,
			"at most %d alerts on the %s tier; delete one first (you have %d)", max, tier, n)
	}
	rows, err := tx.Query(ctx, `INSERT INTO alerts AS a (id, client_id, name, market, expression, symbols, cooldown_seconds)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING `+alertColumns,
		newUUID(), a.ClientID, a.Name, string(a.Market), a.Expression, a.Symbols, a.CooldownSeconds)
	if err != nil {
		return domain.Alert{}, translate(err, "alert")
	}
	out, err := pgx.CollectExactlyOneRow(rows, scanAlert)
	if err != nil {
		return domain.Alert{}, translate(err, "alert")
	}
	return out, translate(tx.Commit(ctx), "alert")
}

// Alerts lists a client's alerts, oldest first.
func (db *DB) Alerts(ctx context.Context, clientID string) ([]domain.Alert, error) {
	rows, err := db.Pool.Query(ctx, `SELECT `+alertColumns+` FROM alerts a WHERE a.client_id::text = $1 ORDER BY a.created_at, a.id`, clientID)
	if err != nil {
		return nil, translate(err, "alerts")
	}
	out, err := pgx.CollectRows(rows, scanAlert)
	return out, translate(err, "alerts")
}

// Alert is one of a client's alerts. Another client's id, an unknown or a
// malformed one is ENOTFOUND: one client never learns of another's alerts.
func (db *DB) Alert(ctx context.Context, clientID, id string) (domain.Alert, error) {
	if !uuidRE.MatchString(id) {
		return domain.Alert{}, notFoundAlert(id)
	}
	rows, err := db.Pool.Query(ctx, `SELECT `+alertColumns+` FROM alerts a WHERE a.id = $1 AND a.client_id::text = $2`, id, clientID)
	if err != nil {
		return domain.Alert{}, translate(err, "alert")
	}
	a, err := pgx.CollectExactlyOneRow(rows, scanAlert)
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.Alert{}, notFoundAlert(id)
	}
	return a, translate(err, "alert")
}

// DeleteAlert deletes a client's alert and its state. Events it fired
// before stay in the outbox and are delivered.
func (db *DB) DeleteAlert(ctx context.Context, clientID, id string) error {
	if !uuidRE.MatchString(id) {
		return notFoundAlert(id)
	}
	tag, err := db.Pool.Exec(ctx, `DELETE FROM alerts WHERE id = $1 AND client_id::text = $2`, id, clientID)
	if err != nil {
		return translate(err, "alert")
	}
	if tag.RowsAffected() == 0 {
		return notFoundAlert(id)
	}
	return nil
}

// AlertEvent is an alert.triggered event in the outbox.
type AlertEvent struct {
	ID        int64
	AlertID   string
	AlertName string
	ClientID  string
	Market    domain.Market
	Symbol    string
	At        time.Time
	// Read holds the values of every variable the condition read.
	Read    map[string]any
	Sandbox bool
}

// AlertEvents returns the alert events after id, oldest first (tests,
// benchmarks).
func (db *DB) AlertEvents(ctx context.Context, afterID int64, limit int) ([]AlertEvent, error) {
	rows, err := db.Pool.Query(ctx, `SELECT id, alert_id::text, alert_name, client_id::text, market, symbol, at, read, sandbox
		FROM alert_events WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit)
	if err != nil {
		return nil, translate(err, "alert events")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AlertEvent, error) {
		var e AlertEvent
		var market string
		err := row.Scan(&e.ID, &e.AlertID, &e.AlertName, &e.ClientID, &market, &e.Symbol, &e.At, &e.Read, &e.Sandbox)
		e.Market, e.At = domain.Market(market), e.At.UTC()
		return e, err
	})
	return out, translate(err, "alert events")
}
