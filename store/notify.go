package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// VerdictEventsChannel is the Postgres NOTIFY channel on which every
// committed verdict event of a schema is announced (migration 00009, a
// trigger on verdict_events): "<schema>.verdict_events", so
// "public.verdict_events" by default. The payload is the event id as
// decimal text. NOTIFY is transactional: a notification arrives only after
// the inserting transaction committed, so the event is readable when it
// arrives. It is a hint, not a queue: a listener that was disconnected
// misses what was sent meanwhile, which is why ListenVerdictEvents reports
// every (re)connect.
func VerdictEventsChannel(schema string) string { return schema + ".verdict_events" }

// ListenVerdictEvents listens on the VerdictEventsChannel of its schema on a connection of
// its own (not one of the pool's) until ctx ends. onEvent gets each
// announced event id; onConnect runs after every successful LISTEN,
// including reconnects, so the caller can catch up on what a lost
// connection missed. A broken connection is re-opened with a backoff from
// 250 ms up to 10 s. It returns only when ctx ends.
func (db *DB) ListenVerdictEvents(ctx context.Context, onEvent func(id int64), onConnect func()) error {
	return db.listen(ctx, VerdictEventsChannel, func(payload string) {
		if id, err := strconv.ParseInt(payload, 10, 64); err == nil {
			onEvent(id)
		} // else not an event id: not ours to act on
	}, onConnect)
}

// StreamChannel is the Postgres NOTIFY channel of a schema's stream log
// (migration 00010): every transaction that wrote stream events notifies
// "<schema>.stream_events" at commit, with an empty payload.
func StreamChannel(schema string) string { return schema + ".stream_events" }

// ListenStream calls wake each time a transaction that wrote stream events
// commits, and after every (re)connect (what a lost connection missed),
// until ctx ends; as ListenVerdictEvents, on a connection of its own.
func (db *DB) ListenStream(ctx context.Context, wake func()) error {
	return db.listen(ctx, StreamChannel, func(string) { wake() }, wake)
}

// listen holds a LISTEN on channel(schema) of this process's schema,
// re-opening a broken connection with a backoff from 250 ms up to 10 s,
// until ctx ends.
func (db *DB) listen(ctx context.Context, channel func(schema string) string, onNotify func(payload string), onConnect func()) error {
	backoff := 250 * time.Millisecond
	for ctx.Err() == nil {
		connected, err := db.listenOnce(ctx, channel, onNotify, onConnect)
		if ctx.Err() != nil {
			break
		}
		if connected {
			backoff = 250 * time.Millisecond
		}
		db.logger.Warn("notification listener lost its connection; reconnecting", "channel", channel("<schema>"), "err", err, "retry_in", backoff.String())
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
	return nil
}

// listenOnce holds one connection until it breaks or ctx ends; connected
// says whether LISTEN succeeded.
func (db *DB) listenOnce(ctx context.Context, channel func(schema string) string, onNotify func(payload string), onConnect func()) (bool, error) {
	conn, err := pgx.ConnectConfig(ctx, db.Pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, fmt.Errorf("store: listen: connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	// The schema the tables are in: the first of the search path, as for
	// every other statement of this process.
	var schema string
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		return false, fmt.Errorf("store: listen: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel(schema)}.Sanitize()); err != nil {
		return false, fmt.Errorf("store: listen: %w", err)
	}
	if onConnect != nil {
		onConnect()
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, db.listenCheckEvery())
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed() {
			// Quiet for a while: is this still the primary? A former
			// primary that a failover left up read-only (or a standby)
			// keeps the connection open, but the notifications are sent
			// by the new primary's commits.
			var readOnly bool
			if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'`).Scan(&readOnly); err != nil {
				return true, fmt.Errorf("store: listen: %w", err)
			}
			if readOnly {
				return true, errors.New("store: listen: the server is read-only (a failover?): reconnecting to the primary")
			}
			continue
		}
		if err != nil {
			return true, fmt.Errorf("store: listen: %w", err)
		}
		onNotify(n.Payload)
	}
}

// listenCheckEvery is how long a notification listener waits before it
// checks that its server is still the primary.
func (db *DB) listenCheckEvery() time.Duration {
	if d := db.listenCheck.Load(); d > 0 {
		return time.Duration(d)
	}
	return 10 * time.Second
}
