package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
)

// StreamFilter selects the events one stream receives.
type StreamFilter struct {
	Markets []domain.Market
	Kinds   []string
	// SandboxClientID adds that client's sandbox pushes to the log's
	// own events ("" = the log's own events only). A sandbox's log holds
	// pushes (client-scoped rows); the service's never does.
	SandboxClientID string
}

// streamEventColumns: a verdict_changed row carries its event in
// verdict_events (e), or in its push_* columns when it is a sandbox push
// (migration 00012).
const streamEventColumns = `s.id, s.xid::text::bigint, s.kind, s.market, s.exchange, s.instrument, s.sandbox_client_id::text, s.at,
	coalesce(e.id, s.push_event_id), coalesce(e.symbol, s.push_symbol), coalesce(e.old_verdict, s.push_old_verdict),
	coalesce(e.new_verdict, s.push_new_verdict), coalesce(e.overall_score, s.push_overall_score), coalesce(e.at, s.push_at)`

func scanStreamEvent(row pgx.CollectableRow) (domain.StreamEvent, error) {
	return scanStreamEventAnd(row)
}

// scanStreamEventAnd scans an event's columns and then extra ones.
func scanStreamEventAnd(row pgx.CollectableRow, extra ...any) (domain.StreamEvent, error) {
	var (
		ev                            domain.StreamEvent
		market                        string
		exchange, instrument, sandbox *string
		eid, score                    *int64
		symbol, oldV, newV            *string
		eat                           *time.Time
	)
	if err := row.Scan(append([]any{&ev.ID, &ev.Pos.XID, &ev.Kind, &market, &exchange, &instrument, &sandbox, &ev.At,
		&eid, &symbol, &oldV, &newV, &score, &eat}, extra...)...); err != nil {
		return ev, err
	}
	ev.Pos.ID = ev.ID
	ev.Market, ev.At = domain.Market(market), ev.At.UTC()
	if exchange != nil {
		ev.Exchange = *exchange
	}
	if instrument != nil {
		ev.Instrument = *instrument
	}
	if sandbox != nil {
		ev.SandboxClientID = *sandbox
	}
	if eid != nil {
		ev.Verdict = &domain.VerdictChange{EventID: *eid, Symbol: *symbol, OldVerdict: *oldV, NewVerdict: *newV,
			OverallScore: int(*score), At: eat.UTC()}
	}
	return ev, nil
}

// ended is the condition of a row whose transaction has ended (committed,
// since the row is visible): older than the oldest transaction still
// running when the statement's snapshot was taken.
const ended = `s.xid < pg_snapshot_xmin(pg_current_snapshot())`

// LastStreamPos is the newest position of the stream that is final: every
// event before it is committed, and every event committed later comes
// after it. A stream that starts here and reads "after" misses nothing.
func (db *DB) LastStreamPos(ctx context.Context) (domain.StreamPos, error) {
	var p domain.StreamPos
	err := db.Pool.QueryRow(ctx, `SELECT s.xid::text::bigint, s.id FROM stream_events s WHERE `+ended+`
		ORDER BY s.xid DESC, s.id DESC LIMIT 1`).Scan(&p.XID, &p.ID)
	if err != nil && errors.Is(err, pgx.ErrNoRows) {
		return domain.StreamPos{}, nil
	}
	return p, translate(err, "stream events")
}

// StreamEvents returns up to limit events after a position, every kind
// and every client's, in stream order, only of transactions that have
// ended: what one api replica fans out to its streams.
func (db *DB) StreamEvents(ctx context.Context, after domain.StreamPos, limit int) ([]domain.StreamEvent, error) {
	rows, err := db.Pool.Query(ctx, `SELECT `+streamEventColumns+` FROM stream_events s
		LEFT JOIN verdict_events e ON e.id = s.verdict_event_id
		WHERE `+ended+` AND (s.xid, s.id) > ($1::bigint::text::xid8, $2)
		ORDER BY s.xid, s.id LIMIT $3`, after.XID, after.ID, limit)
	if err != nil {
		return nil, translate(err, "stream events")
	}
	out, err := pgx.CollectRows(rows, scanStreamEvent)
	return out, translate(err, "stream events")
}

// StreamEventsHeld is StreamEvents, and whether, in the same snapshot,
// committed events after the position are held back: their transaction is
// newer than one still running, so they become readable when that one
// ends (the hub then reads again shortly instead of at its safety poll).
func (db *DB) StreamEventsHeld(ctx context.Context, after domain.StreamPos, limit int) ([]domain.StreamEvent, bool, error) {
	// One row at least: the events (none: one row of NULLs, id 0) with the
	// flag beside each. Every part of one statement shares its snapshot.
	rows, err := db.Pool.Query(ctx, `WITH x AS MATERIALIZED (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin),
		ev (id, xid, kind, market, exchange, instrument, sandbox, at, eid, symbol, old_verdict, new_verdict, overall_score, eat) AS (
			SELECT `+streamEventColumns+`
			FROM stream_events s LEFT JOIN verdict_events e ON e.id = s.verdict_event_id
			WHERE s.xid < (SELECT xmin FROM x) AND (s.xid, s.id) > ($1::bigint::text::xid8, $2)
			ORDER BY s.xid, s.id LIMIT $3)
		SELECT coalesce(s.id, 0), coalesce(s.xid, 0), coalesce(s.kind, ''), coalesce(s.market, ''),
			s.exchange, s.instrument, s.sandbox, coalesce(s.at, 'epoch'),
			s.eid, s.symbol, s.old_verdict, s.new_verdict, s.overall_score, s.eat, h.held
		FROM ev s RIGHT JOIN (SELECT EXISTS (SELECT 1 FROM stream_events h
			WHERE h.xid >= (SELECT xmin FROM x) AND (h.xid, h.id) > ($1::bigint::text::xid8, $2)) AS held) h ON true
		ORDER BY s.xid, s.id`, after.XID, after.ID, limit)
	if err != nil {
		return nil, false, translate(err, "stream events")
	}
	var held bool
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.StreamEvent, error) {
		return scanStreamEventAnd(row, &held)
	})
	if err != nil {
		return nil, false, translate(err, "stream events")
	}
	if len(out) == 1 && out[0].ID == 0 {
		out = out[:0]
	}
	return out, held, nil
}

// StreamPosOf is the position of the event with the given wire id; false
// when the stream does not hold it (never was, or pruned).
func (db *DB) StreamPosOf(ctx context.Context, id int64) (domain.StreamPos, bool, error) {
	p := domain.StreamPos{ID: id}
	err := db.Pool.QueryRow(ctx, `SELECT xid::text::bigint FROM stream_events WHERE id = $1`, id).Scan(&p.XID)
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.StreamPos{}, false, nil
	}
	return p, err == nil, translate(err, "stream events")
}

// ReplayStreamEvents returns up to limit events of f after a position, up
// to and including upTo (a position the hub reached: final), in stream
// order: what a stream resumed with Last-Event-ID missed. Every
// verdict_changed event is returned; of the screener events only the
// newest of each combination in the range, since a screener event is a
// full snapshot that supersedes the older ones.
func (db *DB) ReplayStreamEvents(ctx context.Context, f StreamFilter, after, upTo domain.StreamPos, limit int) ([]domain.StreamEvent, error) {
	rows, err := db.Pool.Query(ctx, `WITH r AS (
			SELECT * FROM stream_events s
			WHERE (s.xid, s.id) > ($1::bigint::text::xid8, $2) AND (s.xid, s.id) <= ($3::bigint::text::xid8, $4)
				AND s.market = ANY($5) AND s.kind = ANY($6)
				AND (s.sandbox_client_id IS NULL OR s.sandbox_client_id = nullif($7, '')::uuid)
		)
		SELECT `+streamEventColumns+` FROM r s LEFT JOIN verdict_events e ON e.id = s.verdict_event_id
		WHERE s.kind <> 'screener' OR NOT EXISTS (
			SELECT 1 FROM r n WHERE n.kind = 'screener' AND n.market = s.market AND n.exchange = s.exchange
				AND n.instrument = s.instrument AND (n.xid, n.id) > (s.xid, s.id))
		ORDER BY s.xid, s.id LIMIT $8`,
		after.XID, after.ID, upTo.XID, upTo.ID, domain.MarketNames(f.Markets), f.Kinds, f.SandboxClientID, limit)
	if err != nil {
		return nil, translate(err, "stream events")
	}
	out, err := pgx.CollectRows(rows, scanStreamEvent)
	return out, translate(err, "stream events")
}

// SandboxPusher stores the pushes of POST /sandbox/verdict-change: Live
// is the service's database, Sandbox the sandbox's (the sandbox server's
// streams read its log).
type SandboxPusher struct {
	Live, Sandbox *DB
}

// InsertSandboxVerdictEvent stores a verdict change pushed by a client's
// sandbox key, in both databases: a verdict_events row marked with the
// client in the service's (the live worker fans it out to that client's
// webhooks only; its id is the event's id), and a stream_events row
// scoped to the client in the sandbox's, carrying the event (that
// client's sandbox streams only; its commit notifies the sandbox's hubs).
//
// The two commits are as close to one as two databases allow: the
// sandbox's row commits while the service's transaction is open, and that
// one commits next. A failure before the sandbox's commit leaves nothing;
// a failure of the last commit alone leaves the event on the client's
// sandbox streams without its webhook deliveries (and an error answer).
func (p SandboxPusher) InsertSandboxVerdictEvent(ctx context.Context, clientID string, m domain.Market, symbol, oldVerdict, newVerdict string, score int) (domain.VerdictChange, error) {
	v := domain.VerdictChange{Symbol: symbol, OldVerdict: oldVerdict, NewVerdict: newVerdict, OverallScore: score}
	tx, err := p.Live.Pool.Begin(ctx)
	if err != nil {
		return v, translate(err, "sandbox verdict event")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit: a no-op
	if err := tx.QueryRow(ctx, `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at, sandbox_client_id)
		VALUES ($1, $2, $3, $4, $5, clock_timestamp(), $6) RETURNING id, at`,
		string(m), symbol, oldVerdict, newVerdict, score, clientID).Scan(&v.EventID, &v.At); err != nil {
		return v, translate(err, "sandbox verdict event")
	}
	v.At = v.At.UTC()
	// stream_written notifies the sandbox's channel at commit (and prunes
	// now and then), as the log's triggers do.
	if _, err := p.Sandbox.Pool.Exec(ctx, `INSERT INTO stream_events (kind, market, sandbox_client_id,
			push_event_id, push_symbol, push_old_verdict, push_new_verdict, push_overall_score, push_at)
		SELECT 'verdict_changed', $1, $2, $3, $4, $5, $6, $7, $8 FROM (SELECT stream_written(current_schema())) w`,
		string(m), clientID, v.EventID, symbol, oldVerdict, newVerdict, score, v.At); err != nil {
		return v, translate(err, "sandbox stream event")
	}
	return v, translate(tx.Commit(ctx), "sandbox verdict event")
}

// UsedThisMonth is the client's monthly count, from the service's
// database (GET /usage of a sandbox key).
func (p SandboxPusher) UsedThisMonth(ctx context.Context, clientID string, now time.Time) (int64, error) {
	return p.Live.UsedThisMonth(ctx, clientID, now)
}

// EnsureSchema creates the first schema of the connection's search_path
// when it does not exist yet (the sandbox's schema, before its first
// migration).
func (db *DB) EnsureSchema(ctx context.Context) error {
	var current *string
	if err := db.Pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&current); err != nil {
		return translate(err, "schema")
	}
	if current != nil {
		return nil
	}
	var path string
	if err := db.Pool.QueryRow(ctx, `SELECT current_setting('search_path')`).Scan(&path); err != nil {
		return translate(err, "schema")
	}
	name := strings.Trim(strings.TrimSpace(strings.Split(path, ",")[0]), `"`)
	if name == "" || name == "$user" {
		return fmt.Errorf("store: no schema to create in search_path %q", path)
	}
	_, err := db.Pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{name}.Sanitize())
	return translate(err, "schema")
}
