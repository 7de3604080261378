package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

const webhookColumns = `id::text, client_id::text, callback_url, market, status, consecutive_failures, last_delivery_at, coalesce(last_error, ''), created_at`

func scanWebhook(row pgx.CollectableRow) (domain.Webhook, error) {
	var w domain.Webhook
	var market *string
	err := row.Scan(&w.ID, &w.ClientID, &w.CallbackURL, &market, &w.Status, &w.ConsecutiveFailures, &w.LastDeliveryAt, &w.LastError, &w.CreatedAt)
	if market != nil {
		m := domain.Market(*market)
		w.Market = &m
	}
	w.CreatedAt = w.CreatedAt.UTC()
	if w.LastDeliveryAt != nil {
		t := w.LastDeliveryAt.UTC()
		w.LastDeliveryAt = &t
	}
	return w, err
}

// CreateWebhook subscribes a client: it generates the signing secret,
// stores it sealed by box, and returns the subscription with the secret in
// clear (shown to the client once, never again). A client holds at most
// domain.MaxWebhooksPerClient subscriptions (ECONFLICT beyond).
func (db *DB) CreateWebhook(ctx context.Context, box *domain.SecretBox, clientID, callbackURL string, market *domain.Market) (domain.Webhook, string, error) {
	secret, err := domain.NewWebhookSecret()
	if err != nil {
		return domain.Webhook{}, "", err
	}
	id := newUUID()
	sealed, err := box.Seal([]byte(secret), []byte(id))
	if err != nil {
		return domain.Webhook{}, "", err
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return domain.Webhook{}, "", translate(err, "webhook")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	// The client's row serialises concurrent creations, so the limit holds.
	var n int
	if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhooks WHERE client_id = c.id) FROM clients c WHERE c.id = $1 FOR UPDATE`,
		clientID).Scan(&n); err != nil {
		return domain.Webhook{}, "", translate(err, "client")
	}
	if n >= domain.MaxWebhooksPerClient {
		return domain.Webhook{}, "", domain.Errorf(domain.ECONFLICT,
			"at most %d webhook subscriptions per client; delete one first (you have %d)", domain.MaxWebhooksPerClient, n)
	}
	var m *string
	if market != nil {
		s := string(*market)
		m = &s
	}
	rows, err := tx.Query(ctx, `INSERT INTO webhooks (id, client_id, callback_url, market, secret_sealed) VALUES ($1, $2, $3, $4, $5)
		RETURNING `+webhookColumns, id, clientID, callbackURL, m, sealed)
	if err != nil {
		return domain.Webhook{}, "", translate(err, "webhook")
	}
	w, err := pgx.CollectExactlyOneRow(rows, scanWebhook)
	if err != nil {
		return domain.Webhook{}, "", translate(err, "webhook")
	}
	if err := tx.Commit(ctx); err != nil {
		return domain.Webhook{}, "", translate(err, "webhook")
	}
	return w, secret, nil
}

// Webhooks lists a client's subscriptions, oldest first; every client's
// when clientID is "" (operators).
func (db *DB) Webhooks(ctx context.Context, clientID string) ([]domain.Webhook, error) {
	rows, err := db.Pool.Query(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE ($1 = '' OR client_id::text = $1)
		ORDER BY created_at, id`, clientID)
	if err != nil {
		return nil, translate(err, "webhooks")
	}
	out, err := pgx.CollectRows(rows, scanWebhook)
	return out, translate(err, "webhooks")
}

// DeleteWebhook cancels a client's subscription (and its pending
// deliveries). Another client's id, an unknown or a malformed one is
// ENOTFOUND: one client never learns of another's subscriptions.
func (db *DB) DeleteWebhook(ctx context.Context, clientID, id string) error {
	if !uuidRE.MatchString(id) {
		return domain.Errorf(domain.ENOTFOUND, "no webhook subscription %q", id)
	}
	tag, err := db.Pool.Exec(ctx, `DELETE FROM webhooks WHERE id = $1 AND client_id = $2`, id, clientID)
	if err != nil {
		return translate(err, "webhook")
	}
	if tag.RowsAffected() == 0 {
		return domain.Errorf(domain.ENOTFOUND, "no webhook subscription %q", id)
	}
	return nil
}

// EnableWebhook re-activates a disabled subscription (operators) and
// resets its failure count. Deliveries dropped when it was disabled stay
// dropped; new events reach it again.
func (db *DB) EnableWebhook(ctx context.Context, id string) error {
	if !uuidRE.MatchString(id) {
		return domain.Errorf(domain.ENOTFOUND, "no webhook subscription %q", id)
	}
	tag, err := db.Pool.Exec(ctx, `UPDATE webhooks SET status = 'active', consecutive_failures = 0, last_error = NULL WHERE id = $1`, id)
	if err != nil {
		return translate(err, "webhook")
	}
	if tag.RowsAffected() == 0 {
		return domain.Errorf(domain.ENOTFOUND, "no webhook subscription %q", id)
	}
	return nil
}

// FanOut turns up to limit new verdict events into one pending delivery
// per matching active subscription (its market, or every market its
// client's tier allows; only subscriptions that existed when the event
// happened; only active clients), and advances the outbox cursor in the
// same transaction. It returns how many events it read.
func (db *DB) FanOut(ctx context.Context, limit int) (int, error) {
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return 0, translate(err, "webhook fan-out")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	if _, err := tx.Exec(ctx, `INSERT INTO outbox_cursors (name, last_id) VALUES ('webhooks', 0) ON CONFLICT DO NOTHING`); err != nil {
		return 0, translate(err, "webhook fan-out")
	}
	var last int64
	if err := tx.QueryRow(ctx, `SELECT last_id FROM outbox_cursors WHERE name = 'webhooks' FOR UPDATE`).Scan(&last); err != nil {
		return 0, translate(err, "webhook fan-out")
	}
	var maxID *int64
	var events int
	err = tx.QueryRow(ctx, `WITH ev AS (
			SELECT id, market, created_at FROM verdict_events WHERE id > $1 ORDER BY id LIMIT $2
		), ins AS (
			INSERT INTO webhook_deliveries (event_id, webhook_id)
			SELECT ev.id, w.id FROM ev
			JOIN webhooks w ON w.status = 'active' AND w.created_at <= ev.created_at
			JOIN clients c ON c.id = w.client_id AND c.status = 'active'
				AND (c.contract_expires_at IS NULL OR c.contract_expires_at > now())
			WHERE w.market = ev.market OR (w.market IS NULL AND ev.market = ANY (c.markets))
			ON CONFLICT DO NOTHING
		)
		SELECT max(id), count(*) FROM ev`, last, limit).Scan(&maxID, &events)
	if err != nil {
		return 0, translate(err, "webhook fan-out")
	}
	if maxID != nil {
		if _, err := tx.Exec(ctx, `UPDATE outbox_cursors SET last_id = $1 WHERE name = 'webhooks'`, *maxID); err != nil {
			return 0, translate(err, "webhook fan-out")
		}
	}
	return events, translate(tx.Commit(ctx), "webhook fan-out")
}

// Delivery is one claimed attempt to deliver an event to a subscription.
type Delivery struct {
	EventID     int64
	WebhookID   string
	Attempt     int // 1 for the first
	CallbackURL string
	Secret      string
	Event       VerdictEvent
}

// ClaimDeliveries claims up to limit due deliveries for lease (another
// worker will not take them meanwhile; a worker that dies leaves them to
// be claimed again when the lease ends) and returns them with their event
// and the subscription's secret, opened with box.
func (db *DB) ClaimDeliveries(ctx context.Context, box *domain.SecretBox, limit int, lease time.Duration) ([]Delivery, error) {
	rows, err := db.Pool.Query(ctx, `WITH due AS (
			SELECT d.event_id, d.webhook_id FROM webhook_deliveries d
			JOIN webhooks w ON w.id = d.webhook_id AND w.status = 'active'
			WHERE d.status = 'pending' AND d.next_attempt_at <= now() AND (d.locked_until IS NULL OR d.locked_until < now())
			ORDER BY d.next_attempt_at LIMIT $1 FOR UPDATE OF d SKIP LOCKED
		), claimed AS (
			UPDATE webhook_deliveries d SET locked_until = now() + $2 * interval '1 millisecond', attempts = d.attempts + 1
			FROM due WHERE d.event_id = due.event_id AND d.webhook_id = due.webhook_id
			RETURNING d.event_id, d.webhook_id, d.attempts
		)
		SELECT c.event_id, c.webhook_id::text, c.attempts, w.callback_url, w.secret_sealed,
			e.market, e.symbol, e.old_verdict, e.new_verdict, e.overall_score, e.at
		FROM claimed c JOIN webhooks w ON w.id = c.webhook_id JOIN verdict_events e ON e.id = c.event_id
		ORDER BY c.event_id`, limit, lease.Milliseconds())
	if err != nil {
		return nil, translate(err, "webhook deliveries")
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		var d Delivery
		var sealed []byte
		var market, oldV, newV string
		if err := rows.Scan(&d.EventID, &d.WebhookID, &d.Attempt, &d.CallbackURL, &sealed,
			&market, &d.Event.Symbol, &oldV, &newV, &d.Event.OverallScore, &d.Event.At); err != nil {
			return nil, translate(err, "webhook deliveries")
		}
		secret, err := box.Open(sealed, []byte(d.WebhookID))
		if err != nil {
			return nil, fmt.Errorf("store: webhook %s: secret does not open with MARKET_SECRET_KEY: %w", d.WebhookID, err)
		}
		d.Secret = string(secret)
		d.Event.ID, d.Event.Market = d.EventID, domain.Market(market)
		d.Event.OldVerdict, d.Event.NewVerdict, d.Event.At = analytics.Verdict(oldV), analytics.Verdict(newV), d.Event.At.UTC()
		out = append(out, d)
	}
	return out, translate(rows.Err(), "webhook deliveries")
}

// RecordDelivery stores the outcome of a claimed delivery. A success
// resets the subscription's consecutive failures; a failure adds one and
// schedules the next attempt at retryAt, unless it was the
// domain.WebhookFailureLimit-th in a row: the subscription is then
// disabled and its pending deliveries dropped. It reports whether the
// subscription was disabled.
func (db *DB) RecordDelivery(ctx context.Context, d Delivery, errMsg string, retryAt time.Time) (disabled bool, err error) {
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return false, translate(err, "webhook delivery")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	if errMsg == "" {
		if _, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET status = 'delivered', delivered_at = now(), locked_until = NULL, last_error = NULL
			WHERE event_id = $1 AND webhook_id = $2`, d.EventID, d.WebhookID); err != nil {
			return false, translate(err, "webhook delivery")
		}
		if _, err := tx.Exec(ctx, `UPDATE webhooks SET consecutive_failures = 0, last_delivery_at = now(), last_error = NULL WHERE id = $1`,
			d.WebhookID); err != nil {
			return false, translate(err, "webhook delivery")
		}
		return false, translate(tx.Commit(ctx), "webhook delivery")
	}
	var failures int
	err = tx.QueryRow(ctx, `UPDATE webhooks SET consecutive_failures = consecutive_failures + 1, last_delivery_at = now(), last_error = $2,
			status = CASE WHEN consecutive_failures + 1 >= $3 THEN 'disabled' ELSE status END
		WHERE id = $1 RETURNING consecutive_failures`, d.WebhookID, errMsg, domain.WebhookFailureLimit).Scan(&failures)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // deleted meanwhile: its deliveries went with it
	}
	if err != nil {
		return false, translate(err, "webhook delivery")
	}
	disabled = failures >= domain.WebhookFailureLimit
	if disabled {
		_, err = tx.Exec(ctx, `UPDATE webhook_deliveries SET status = 'dropped', locked_until = NULL,
			last_error = CASE WHEN event_id = $2 THEN $3 ELSE 'subscription disabled after repeated failures' END
			WHERE webhook_id = $1 AND status = 'pending'`, d.WebhookID, d.EventID, errMsg)
	} else {
		_, err = tx.Exec(ctx, `UPDATE webhook_deliveries SET next_attempt_at = $3, locked_until = NULL, last_error = $4
			WHERE event_id = $1 AND webhook_id = $2`, d.EventID, d.WebhookID, retryAt.UTC(), errMsg)
	}
	if err != nil {
		return false, translate(err, "webhook delivery")
	}
	return disabled, translate(tx.Commit(ctx), "webhook delivery")
}

// WebhookDeliveryStatus is a delivery's status and attempts (tests, CLI).
func (db *DB) WebhookDeliveryStatus(ctx context.Context, eventID int64, webhookID string) (status string, attempts int, err error) {
	err = db.Pool.QueryRow(ctx, `SELECT status, attempts FROM webhook_deliveries WHERE event_id = $1 AND webhook_id = $2`,
		eventID, webhookID).Scan(&status, &attempts)
	return status, attempts, translate(err, "webhook delivery")
}
