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

// ValidWebhookID reports whether id has the form of a subscription id.
func ValidWebhookID(id string) bool { return uuidRE.MatchString(id) }

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// ErrLeaseLost: an outcome was not recorded because the worker no longer
// holds the subscription's lease (it ran out and another worker took it)
// or the subscription was deleted meanwhile.
var ErrLeaseLost = errors.New("store: webhook lease lost (expired, taken over, or the subscription was deleted)")

const webhookColumns = `id::text, client_id::text, callback_url, market, status, consecutive_failures, last_delivery_at,
	last_success_at, last_error_category, last_error_status, last_error_at,
	CASE WHEN secret_prev_until > now() THEN secret_prev_until END, created_at`

func scanWebhook(row pgx.CollectableRow) (domain.Webhook, error) {
	var w domain.Webhook
	var market, category *string
	var status *int
	err := row.Scan(&w.ID, &w.ClientID, &w.CallbackURL, &market, &w.Status, &w.ConsecutiveFailures, &w.LastDeliveryAt,
		&w.LastSuccessAt, &category, &status, &w.LastErrorAt, &w.PreviousSecretUntil, &w.CreatedAt)
	if market != nil {
		m := domain.Market(*market)
		w.Market = &m
	}
	w.LastError = deliveryError(category, status)
	w.CreatedAt = w.CreatedAt.UTC()
	for _, t := range []**time.Time{&w.LastDeliveryAt, &w.LastSuccessAt, &w.LastErrorAt, &w.PreviousSecretUntil} {
		if *t != nil {
			u := (*t).UTC()
			*t = &u
		}
	}
	return w, err
}

func deliveryError(category *string, status *int) domain.DeliveryError {
	var e domain.DeliveryError
	if category != nil {
		e.Category = *category
		if status != nil && e.Category == domain.ErrHTTPStatus {
			e.Status = *status
		}
	}
	return e
}

// nullable returns nil for the zero value (a NULL column).
func nullable[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
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

func notFoundWebhook(id string) error {
	return domain.Errorf(domain.ENOTFOUND, "no webhook subscription %q", id)
}

// DeleteWebhook cancels a client's subscription (and its pending
// deliveries). Another client's id, an unknown or a malformed one is
// ENOTFOUND: one client never learns of another's subscriptions.
func (db *DB) DeleteWebhook(ctx context.Context, clientID, id string) error {
	if !uuidRE.MatchString(id) {
		return notFoundWebhook(id)
	}
	tag, err := db.Pool.Exec(ctx, `DELETE FROM webhooks WHERE id = $1 AND client_id = $2`, id, clientID)
	if err != nil {
		return translate(err, "webhook")
	}
	if tag.RowsAffected() == 0 {
		return notFoundWebhook(id)
	}
	return nil
}

// EnableWebhook re-activates a subscription and resets its failure count:
// a client's own (clientID set) or any (clientID "", operators).
// Deliveries dropped when it was disabled stay dropped (redeliver them one
// by one); new events reach it again. Enabling an active one changes
// nothing but the count.
func (db *DB) EnableWebhook(ctx context.Context, clientID, id string) (domain.Webhook, error) {
	if !uuidRE.MatchString(id) {
		return domain.Webhook{}, notFoundWebhook(id)
	}
	rows, err := db.Pool.Query(ctx, `UPDATE webhooks SET status = 'active', consecutive_failures = 0
		WHERE id = $1 AND ($2 = '' OR client_id::text = $2) RETURNING `+webhookColumns, id, clientID)
	if err != nil {
		return domain.Webhook{}, translate(err, "webhook")
	}
	w, err := pgx.CollectExactlyOneRow(rows, scanWebhook)
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.Webhook{}, notFoundWebhook(id)
	}
	return w, translate(err, "webhook")
}

// RotateWebhookSecret gives a client's subscription a new secret (returned
// in clear, shown once). The replaced secret keeps signing deliveries
// beside the new one for domain.SecretRotationOverlap; a secret replaced
// earlier stops at once.
func (db *DB) RotateWebhookSecret(ctx context.Context, box *domain.SecretBox, clientID, id string) (domain.Webhook, string, error) {
	if !uuidRE.MatchString(id) {
		return domain.Webhook{}, "", notFoundWebhook(id)
	}
	secret, err := domain.NewWebhookSecret()
	if err != nil {
		return domain.Webhook{}, "", err
	}
	sealed, err := box.Seal([]byte(secret), []byte(id))
	if err != nil {
		return domain.Webhook{}, "", err
	}
	rows, err := db.Pool.Query(ctx, `UPDATE webhooks SET secret_prev_sealed = secret_sealed, secret_sealed = $3,
			secret_prev_until = now() + $4 * interval '1 second'
		WHERE id = $1 AND client_id::text = $2 RETURNING `+webhookColumns,
		id, clientID, sealed, domain.SecretRotationOverlap.Seconds())
	if err != nil {
		return domain.Webhook{}, "", translate(err, "webhook")
	}
	w, err := pgx.CollectExactlyOneRow(rows, scanWebhook)
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.Webhook{}, "", notFoundWebhook(id)
	}
	return w, secret, translate(err, "webhook")
}

// WebhookTarget is where and with which secrets a subscription is sent to.
type WebhookTarget struct {
	Webhook        domain.Webhook
	Secret         string
	PreviousSecret string // "" without a rotation within the overlap
}

// WebhookTarget loads a client's subscription with its secrets opened by
// box (the test ping).
func (db *DB) WebhookTarget(ctx context.Context, box *domain.SecretBox, clientID, id string) (WebhookTarget, error) {
	if !uuidRE.MatchString(id) {
		return WebhookTarget{}, notFoundWebhook(id)
	}
	var t WebhookTarget
	var sealed, prev []byte
	rows, err := db.Pool.Query(ctx, `SELECT `+webhookColumns+`, secret_sealed, CASE WHEN secret_prev_until > now() THEN secret_prev_sealed END
		FROM webhooks WHERE id = $1 AND client_id::text = $2`, id, clientID)
	if err != nil {
		return t, translate(err, "webhook")
	}
	t.Webhook, err = pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (domain.Webhook, error) {
		w, err := scanWebhook(extraColumns{row, []any{&sealed, &prev}})
		return w, err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return t, notFoundWebhook(id)
	}
	if err != nil {
		return t, translate(err, "webhook")
	}
	t.Secret, t.PreviousSecret, err = openSecrets(box, id, sealed, prev)
	return t, err
}

// extraColumns scans webhookColumns and then the extra destinations.
type extraColumns struct {
	pgx.CollectableRow
	extra []any
}

func (e extraColumns) Scan(dest ...any) error {
	return e.CollectableRow.Scan(append(dest, e.extra...)...)
}

// openSecrets opens a subscription's current and (when set) previous
// secret.
func openSecrets(box *domain.SecretBox, id string, sealed, prevSealed []byte) (secret, prev string, err error) {
	plain, err := box.Open(sealed, []byte(id))
	if err != nil {
		return "", "", fmt.Errorf("store: webhook %s: secret does not open with MARKET_SECRET_KEY: %w", id, err)
	}
	if prevSealed != nil {
		p, err := box.Open(prevSealed, []byte(id))
		if err != nil {
			return "", "", fmt.Errorf("store: webhook %s: previous secret does not open with MARKET_SECRET_KEY: %w", id, err)
		}
		prev = string(p)
	}
	return string(plain), prev, nil
}

// eligible is the condition under which delivery d of event e may go to
// subscription w of client c: an active subscription of an active client
// whose contract has not ended, and the event's market in the client's
// tier (and the subscription's market, when it names one); an alert event
// and a sandbox push (POST /sandbox/verdict-change) go to their own
// client's subscriptions only. e is a row of outbox_events.
const eligible = `w.status = 'active' AND c.status = 'active' AND (c.contract_expires_at IS NULL OR c.contract_expires_at > now())
	AND e.market = ANY (c.markets) AND (w.market IS NULL OR w.market = e.market)
	AND (e.client_id IS NULL OR e.client_id = w.client_id)`

// FanOut turns up to limit events not fanned out yet (verdict events,
// then alert events) into one pending delivery per eligible subscription
// (only subscriptions that existed when the event happened) and marks them
// fanned out, in one transaction per kind. Concurrent fan-outs take
// disjoint events. It returns how many events it read.
func (db *DB) FanOut(ctx context.Context, limit int) (int, error) {
	var events int
	for _, table := range []string{"verdict_events", "alert_events"} {
		var n int
		err := db.Pool.QueryRow(ctx, `WITH ev AS (
				SELECT id FROM `+table+` WHERE NOT fanned_out ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
			), ins AS (
				INSERT INTO webhook_deliveries (event_id, webhook_id)
				SELECT e.id, w.id FROM ev JOIN outbox_events e ON e.id = ev.id
				JOIN webhooks w ON w.created_at <= e.created_at
				JOIN clients c ON c.id = w.client_id
				WHERE `+eligible+`
				ORDER BY e.id
				ON CONFLICT DO NOTHING
			), mark AS (
				UPDATE `+table+` v SET fanned_out = true FROM ev WHERE v.id = ev.id
			)
			SELECT count(*) FROM ev`, limit).Scan(&n)
		if err != nil {
			return events, translate(err, "webhook fan-out")
		}
		events += n
	}
	return events, nil
}

// DropIneligible drops the pending deliveries that may no longer be sent:
// the client was suspended or its contract ended (client_inactive), or the
// event's market left the client's tier (market_not_in_tier). A
// subscription with a delivery in flight is left to the next call.
func (db *DB) DropIneligible(ctx context.Context) (int64, error) {
	tag, err := db.Pool.Exec(ctx, `UPDATE webhook_deliveries d SET status = 'dropped',
			drop_reason = CASE WHEN c.status <> 'active' OR c.contract_expires_at <= now() THEN 'client_inactive' ELSE 'market_not_in_tier' END
		FROM webhooks w, clients c, outbox_events e
		WHERE d.status = 'pending' AND w.id = d.webhook_id AND c.id = w.client_id AND e.id = d.event_id
			AND (w.lease_until IS NULL OR w.lease_until < now())
			AND w.status = 'active' AND NOT (`+eligible+`)`)
	if err != nil {
		return 0, translate(err, "webhook deliveries")
	}
	return tag.RowsAffected(), nil
}

// Delivery is one claimed attempt to deliver an event to a subscription.
type Delivery struct {
	ID          int64 // the delivery's id
	EventID     int64
	WebhookID   string
	ClientID    string
	LeaseToken  string
	Attempt     int // 1 for the first
	CallbackURL string
	Secret      string
	// PreviousSecret also signs, within a day of a rotation.
	PreviousSecret string
	// SecretErr is set when the secrets would not open: nothing may be sent.
	SecretErr error
	// Kind is domain.EventVerdictChanged (Event is set) or
	// domain.EventAlertTriggered (Alert is set; Event carries its market,
	// symbol and instant).
	Kind  string
	Event VerdictEvent
	Alert AlertEvent
}

// ClaimDeliveries leases up to limit subscriptions for lease and returns
// the oldest pending delivery of each, when it is due and may be sent
// (eligible). At most one delivery per subscription is claimed at a time:
// a leased subscription is not claimed again until its outcome is recorded
// or the lease runs out (a dead worker). The healthiest subscriptions come
// first (no failure since the last success), then the longest waiting.
// Concurrent claims (several workers) take disjoint subscriptions.
func (db *DB) ClaimDeliveries(ctx context.Context, box *domain.SecretBox, limit int, lease time.Duration) ([]Delivery, error) {
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return nil, translate(err, "webhook claim")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	// 1. Lease the subscriptions whose queue head is due and eligible.
	rows, err := tx.Query(ctx, `WITH heads AS (
			SELECT DISTINCT ON (d.webhook_id) d.webhook_id, d.event_id, d.next_attempt_at
			FROM webhook_deliveries d WHERE d.status = 'pending'
			ORDER BY d.webhook_id, d.event_id
		), due AS (
			SELECT w.id FROM heads h
			JOIN webhooks w ON w.id = h.webhook_id
			JOIN clients c ON c.id = w.client_id
			JOIN outbox_events e ON e.id = h.event_id
			WHERE h.next_attempt_at <= now() AND (w.lease_until IS NULL OR w.lease_until < now()) AND `+eligible+`
			ORDER BY w.consecutive_failures > 0, h.next_attempt_at, h.event_id
			LIMIT $1
			FOR UPDATE OF w SKIP LOCKED
		)
		UPDATE webhooks w SET lease_token = gen_random_uuid(), lease_until = now() + $2 * interval '1 millisecond'
		FROM due WHERE w.id = due.id
		RETURNING w.id::text`, limit, lease.Milliseconds())
	if err != nil {
		return nil, translate(err, "webhook claim")
	}
	leased, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(leased) == 0 {
		return nil, translate(err, "webhook claim")
	}
	// 2. With the subscriptions locked, read their heads again (a fresh
	// snapshot: an outcome committed just before the lock is seen) and
	// count the attempt.
	rows, err = tx.Query(ctx, `WITH heads AS (
			SELECT DISTINCT ON (d.webhook_id) d.id, d.webhook_id, d.event_id, d.next_attempt_at
			FROM webhook_deliveries d WHERE d.status = 'pending' AND d.webhook_id = ANY ($1::uuid[])
			ORDER BY d.webhook_id, d.event_id
		), sent AS (
			UPDATE webhook_deliveries d SET attempts = d.attempts + 1, last_attempt_at = now()
			FROM heads h JOIN webhooks w ON w.id = h.webhook_id JOIN clients c ON c.id = w.client_id
				JOIN outbox_events e ON e.id = h.event_id
			WHERE d.id = h.id AND d.status = 'pending' AND h.next_attempt_at <= now() AND `+eligible+`
			RETURNING d.id, d.event_id, d.webhook_id, d.attempts
		)
		SELECT s.id, s.event_id, w.id::text, w.client_id::text, w.lease_token::text, s.attempts, w.callback_url, w.secret_sealed,
			CASE WHEN w.secret_prev_until > now() THEN w.secret_prev_sealed END,
			e.kind, e.market, e.symbol, coalesce(e.old_verdict, ''), coalesce(e.new_verdict, ''), coalesce(e.overall_score, 0), e.at,
			e.sandbox, coalesce(e.model_version, ''), coalesce(e.alert_id::text, ''), coalesce(e.alert_name, ''), e.read
		FROM sent s JOIN webhooks w ON w.id = s.webhook_id JOIN outbox_events e ON e.id = s.event_id
		ORDER BY s.event_id`, leased)
	if err != nil {
		return nil, translate(err, "webhook claim")
	}
	var out []Delivery
	claimed := map[string]bool{}
	for rows.Next() {
		var d Delivery
		var sealed, prev []byte
		var market, oldV, newV string
		if err := rows.Scan(&d.ID, &d.EventID, &d.WebhookID, &d.ClientID, &d.LeaseToken, &d.Attempt, &d.CallbackURL, &sealed, &prev,
			&d.Kind, &market, &d.Event.Symbol, &oldV, &newV, &d.Event.OverallScore, &d.Event.At, &d.Event.Sandbox, &d.Event.ModelVersion,
			&d.Alert.AlertID, &d.Alert.AlertName, &d.Alert.Read); err != nil {
			rows.Close()
			return nil, translate(err, "webhook claim")
		}
		// A secret that will not open fails this subscription alone.
		d.Secret, d.PreviousSecret, d.SecretErr = openSecrets(box, d.WebhookID, sealed, prev)
		d.Event.ID, d.Event.Market = d.EventID, domain.Market(market)
		d.Event.OldVerdict, d.Event.NewVerdict, d.Event.At = analytics.Verdict(oldV), analytics.Verdict(newV), d.Event.At.UTC()
		if d.Kind == domain.EventAlertTriggered {
			d.Alert.ID, d.Alert.ClientID, d.Alert.Market, d.Alert.Symbol = d.EventID, d.ClientID, d.Event.Market, d.Event.Symbol
			d.Alert.At, d.Alert.Sandbox = d.Event.At, d.Event.Sandbox
		}
		claimed[d.WebhookID] = true
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err, "webhook claim")
	}
	// 3. Release what has nothing to send after all.
	var idle []string
	for _, id := range leased {
		if !claimed[id] {
			idle = append(idle, id)
		}
	}
	if len(idle) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE webhooks SET lease_token = NULL, lease_until = NULL WHERE id = ANY ($1::uuid[])`, idle); err != nil {
			return nil, translate(err, "webhook claim")
		}
	}
	return out, translate(tx.Commit(ctx), "webhook claim")
}

// RecordDelivery stores the outcome of a claimed delivery and releases the
// lease, only while the lease is still d's (ErrLeaseLost otherwise:
// nothing is written). A success (the zero DeliveryError) resets the
// subscription's consecutive failures; a failure adds exactly one and
// schedules the next attempt retryAfter from now, unless it was the
// domain.WebhookFailureLimit-th in a row: the subscription is then
// disabled and its pending deliveries dropped. It reports whether this
// outcome disabled the subscription.
func (db *DB) RecordDelivery(ctx context.Context, d Delivery, outcome domain.DeliveryError, status int, latency time.Duration,
	retryAfter time.Duration) (disabled bool, err error) {
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return false, translate(err, "webhook delivery")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	ms := int(latency.Milliseconds())
	if outcome.OK() {
		tag, err := tx.Exec(ctx, `UPDATE webhooks SET consecutive_failures = 0, last_delivery_at = now(), last_success_at = now(),
				lease_token = NULL, lease_until = NULL
			WHERE id = $1 AND lease_token = $2`, d.WebhookID, d.LeaseToken)
		if err != nil {
			return false, translate(err, "webhook delivery")
		}
		if tag.RowsAffected() == 0 {
			return false, ErrLeaseLost
		}
		if _, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET status = 'delivered', delivered_at = now(), error_category = NULL,
				response_status = $2, latency_ms = $3
			WHERE id = $1 AND status = 'pending'`, d.ID, nullable(status), ms); err != nil {
			return false, translate(err, "webhook delivery")
		}
		return false, translate(tx.Commit(ctx), "webhook delivery")
	}
	var failures int
	err = tx.QueryRow(ctx, `UPDATE webhooks SET consecutive_failures = consecutive_failures + 1, last_delivery_at = now(),
			last_error_category = $3, last_error_status = $4, last_error_at = now(), lease_token = NULL, lease_until = NULL,
			status = CASE WHEN consecutive_failures + 1 >= $5 THEN 'disabled' ELSE status END
		WHERE id = $1 AND lease_token = $2 RETURNING consecutive_failures`,
		d.WebhookID, d.LeaseToken, outcome.Category, nullable(outcome.Status), domain.WebhookFailureLimit).Scan(&failures)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, ErrLeaseLost
	}
	if err != nil {
		return false, translate(err, "webhook delivery")
	}
	if _, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET error_category = $2, response_status = $3, latency_ms = $4,
			next_attempt_at = now() + $5 * interval '1 millisecond'
		WHERE id = $1 AND status = 'pending'`, d.ID, outcome.Category, nullable(status), ms, retryAfter.Milliseconds()); err != nil {
		return false, translate(err, "webhook delivery")
	}
	disabled = failures == domain.WebhookFailureLimit
	if disabled {
		if err := dropPending(ctx, tx, d.WebhookID); err != nil {
			return false, err
		}
	}
	return disabled, translate(tx.Commit(ctx), "webhook delivery")
}

func dropPending(ctx context.Context, tx pgx.Tx, webhookID string) error {
	_, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET status = 'dropped', drop_reason = $2
		WHERE webhook_id = $1 AND status = 'pending'`, webhookID, domain.DropSubscriptionDisabled)
	return translate(err, "webhook delivery")
}

// ReleaseDelivery gives a claimed delivery back unsent (the attempt is not
// counted) and releases the lease, while it is still d's.
func (db *DB) ReleaseDelivery(ctx context.Context, d Delivery) error {
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return translate(err, "webhook delivery")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	tag, err := tx.Exec(ctx, `UPDATE webhooks SET lease_token = NULL, lease_until = NULL WHERE id = $1 AND lease_token = $2`,
		d.WebhookID, d.LeaseToken)
	if err != nil {
		return translate(err, "webhook delivery")
	}
	if tag.RowsAffected() == 0 {
		return ErrLeaseLost
	}
	if _, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET attempts = attempts - 1 WHERE id = $1 AND status = 'pending'`, d.ID); err != nil {
		return translate(err, "webhook delivery")
	}
	return translate(tx.Commit(ctx), "webhook delivery")
}

// DisableForSecret disables a claimed subscription whose secret would not
// open (category internal_error; the attempt is not counted) and drops its
// pending deliveries, while the lease is still d's.
func (db *DB) DisableForSecret(ctx context.Context, d Delivery) error {
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return translate(err, "webhook")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	tag, err := tx.Exec(ctx, `UPDATE webhooks SET status = 'disabled', last_error_category = $3, last_error_status = NULL,
			last_error_at = now(), lease_token = NULL, lease_until = NULL
		WHERE id = $1 AND lease_token = $2`, d.WebhookID, d.LeaseToken, domain.ErrInternal)
	if err != nil {
		return translate(err, "webhook")
	}
	if tag.RowsAffected() == 0 {
		return ErrLeaseLost
	}
	if _, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET attempts = attempts - 1 WHERE id = $1`, d.ID); err != nil {
		return translate(err, "webhook")
	}
	if err := dropPending(ctx, tx, d.WebhookID); err != nil {
		return err
	}
	return translate(tx.Commit(ctx), "webhook")
}

// SealedSecrets returns up to n sealed secrets of subscriptions other than
// exceptID (id → sealed), to tell a wrong MARKET_SECRET_KEY from one bad row.
func (db *DB) SealedSecrets(ctx context.Context, exceptID string, n int) (map[string][]byte, error) {
	rows, err := db.Pool.Query(ctx, `SELECT id::text, secret_sealed FROM webhooks WHERE id <> $1 ORDER BY created_at DESC LIMIT $2`, exceptID, n)
	if err != nil {
		return nil, translate(err, "webhooks")
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var id string
		var sealed []byte
		if err := rows.Scan(&id, &sealed); err != nil {
			return nil, translate(err, "webhooks")
		}
		out[id] = sealed
	}
	return out, translate(rows.Err(), "webhooks")
}

const deliveryColumns = `d.id, d.webhook_id::text, d.event_id, e.kind, e.market, e.symbol, d.attempts, d.status, d.error_category, d.response_status,
	d.latency_ms, d.last_attempt_at, CASE WHEN d.status = 'pending' THEN d.next_attempt_at END, d.delivered_at,
	coalesce(d.drop_reason, ''), d.created_at`

func scanDelivery(row pgx.CollectableRow) (domain.WebhookDelivery, error) {
	var d domain.WebhookDelivery
	var market string
	var category *string
	var status *int
	err := row.Scan(&d.ID, &d.WebhookID, &d.EventID, &d.Event, &market, &d.Symbol, &d.Attempts, &d.Status, &category, &status,
		&d.LatencyMS, &d.LastAttemptAt, &d.NextAttemptAt, &d.DeliveredAt, &d.DropReason, &d.CreatedAt)
	d.Market = domain.Market(market)
	d.ResponseStatus = status
	if d.Status != domain.DeliveryDelivered {
		d.LastError = deliveryError(category, status)
	}
	d.CreatedAt = d.CreatedAt.UTC()
	for _, t := range []**time.Time{&d.LastAttemptAt, &d.NextAttemptAt, &d.DeliveredAt} {
		if *t != nil {
			u := (*t).UTC()
			*t = &u
		}
	}
	return d, err
}

// ownWebhook checks that id is one of the client's subscriptions.
func (db *DB) ownWebhook(ctx context.Context, clientID, id string) error {
	if !uuidRE.MatchString(id) {
		return notFoundWebhook(id)
	}
	var one int
	err := db.Pool.QueryRow(ctx, `SELECT 1 FROM webhooks WHERE id = $1 AND client_id::text = $2`, id, clientID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return notFoundWebhook(id)
	}
	return translate(err, "webhook")
}

// WebhookDeliveries is the delivery log of a client's subscription, newest
// first, at most limit entries.
func (db *DB) WebhookDeliveries(ctx context.Context, clientID, webhookID string, limit int) ([]domain.WebhookDelivery, error) {
	if err := db.ownWebhook(ctx, clientID, webhookID); err != nil {
		return nil, err
	}
	rows, err := db.Pool.Query(ctx, `SELECT `+deliveryColumns+` FROM webhook_deliveries d JOIN outbox_events e ON e.id = d.event_id
		WHERE d.webhook_id = $1 ORDER BY d.id DESC LIMIT $2`, webhookID, limit)
	if err != nil {
		return nil, translate(err, "webhook deliveries")
	}
	out, err := pgx.CollectRows(rows, scanDelivery)
	return out, translate(err, "webhook deliveries")
}

// Redeliver queues a delivery of a client's subscription again, due now
// (a pending one is made due now). The subscription must be active
// (ECONFLICT) and the event's market still in the client's tier
// (EFORBIDDEN). It goes out in its event's place in the subscription's
// order, with the same event id.
//
// The checks and the update are one transaction holding the subscription's
// and the client's rows: a disabling outcome (RecordDelivery), a tier
// change or a suspension either commits before (and the checks see it) or
// waits for the redelivery (and then drops it with the other pending
// deliveries), so a disabled or ineligible subscription never keeps a
// pending redelivery.
func (db *DB) Redeliver(ctx context.Context, clientID, webhookID string, deliveryID int64) (domain.WebhookDelivery, error) {
	if err := db.ownWebhook(ctx, clientID, webhookID); err != nil {
		return domain.WebhookDelivery{}, err
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		return domain.WebhookDelivery{}, translate(err, "webhook delivery")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	var status string
	var market domain.Market
	var allowed bool
	// FOR SHARE: the subscription's and the client's newest committed
	// rows, which no writer changes before this commits. (The delivery
	// itself is locked by the update: writers lock a subscription before
	// its deliveries, and so does this.)
	err = tx.QueryRow(ctx, `SELECT w.status, e.market, e.market = ANY (c.markets) AND (w.market IS NULL OR w.market = e.market)
		FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id JOIN clients c ON c.id = w.client_id
		JOIN outbox_events e ON e.id = d.event_id WHERE d.id = $1 AND d.webhook_id = $2
		FOR SHARE OF w, c`, deliveryID, webhookID).Scan(&status, &market, &allowed)
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.WebhookDelivery{}, domain.Errorf(domain.ENOTFOUND, "no delivery %d of webhook subscription %s", deliveryID, webhookID)
	}
	if err != nil {
		return domain.WebhookDelivery{}, translate(err, "webhook delivery")
	}
	if status != domain.WebhookActive {
		return domain.WebhookDelivery{}, domain.Errorf(domain.ECONFLICT,
			"webhook subscription %s is disabled; enable it first (POST /webhooks/%s/enable)", webhookID, webhookID)
	}
	if !allowed {
		return domain.WebhookDelivery{}, domain.Errorf(domain.EFORBIDDEN,
			"the market %s of this delivery is not included in your tier or in the subscription", market)
	}
	rows, err := tx.Query(ctx, `WITH upd AS (
			UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = now(), drop_reason = NULL, delivered_at = NULL
			WHERE id = $1 RETURNING *
		)
		SELECT `+deliveryColumns+` FROM upd d JOIN outbox_events e ON e.id = d.event_id`, deliveryID)
	if err != nil {
		return domain.WebhookDelivery{}, translate(err, "webhook delivery")
	}
	out, err := pgx.CollectExactlyOneRow(rows, scanDelivery)
	if err != nil {
		return domain.WebhookDelivery{}, translate(err, "webhook delivery")
	}
	return out, translate(tx.Commit(ctx), "webhook delivery")
}

// WebhookDeliveryStatus is a delivery's status and attempts (tests, CLI).
func (db *DB) WebhookDeliveryStatus(ctx context.Context, eventID int64, webhookID string) (status string, attempts int, err error) {
	err = db.Pool.QueryRow(ctx, `SELECT status, attempts FROM webhook_deliveries WHERE event_id = $1 AND webhook_id = $2`,
		eventID, webhookID).Scan(&status, &attempts)
	return status, attempts, translate(err, "webhook delivery")
}
