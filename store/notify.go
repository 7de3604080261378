package store

import (
	"context"
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
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, fmt.Errorf("store: listen: %w", err)
		}
		onNotify(n.Payload)
	}
}
