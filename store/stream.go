package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/obs"
)

// StreamFilter selects the events one stream receives.
type StreamFilter struct {
	Markets []domain.Market
	Kinds   []string
	// SandboxClientID adds that client's sandbox pushes to the log's
	// own events ("" = the log's own events only). A sandbox's log holds
	// pushes (client-scoped rows); the service's never does.
	SandboxClientID string
	// ClientID is the stream's client: its alert events are in the stream.
	ClientID string
}

// streamEventColumns: a verdict_changed row carries its event in
// verdict_events (e), or in its push_* columns when it is a sandbox push
// (migration 00012).
const streamEventColumns = `s.id, s.seq, s.kind, s.market, s.exchange, s.instrument, s.sandbox_client_id::text, s.at,
	coalesce(e.id, s.push_event_id), coalesce(e.symbol, s.push_symbol), coalesce(e.old_verdict, s.push_old_verdict),
	coalesce(e.new_verdict, s.push_new_verdict), coalesce(e.overall_score, s.push_overall_score), coalesce(e.at, s.push_at),
	e.model_version, s.client_id::text, s.alert_event_id, s.payload`

func scanStreamEvent(row pgx.CollectableRow) (domain.StreamEvent, error) {
	var (
		ev                            domain.StreamEvent
		market                        string
		exchange, instrument, sandbox *string
		eid, score                    *int64
		symbol, oldV, newV            *string
		eat                           *time.Time
		version, client               *string
		alertID                       *int64
		payload                       []byte
	)
	if err := row.Scan(&ev.ID, &ev.Pos.Seq, &ev.Kind, &market, &exchange, &instrument, &sandbox, &ev.At,
		&eid, &symbol, &oldV, &newV, &score, &eat, &version, &client, &alertID, &payload); err != nil {
		return ev, err
	}
	if client != nil {
		ev.ClientID = *client
	}
	if alertID != nil {
		ev.Alert = &domain.StreamAlert{EventID: *alertID, Payload: payload}
	}
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
			OverallScore: int(*score), At: eat.UTC(), ModelVersion: analytics.CurrentVersion().Name}
		if version != nil { // a sandbox push's row carries none: pushes are of the current version
			ev.Verdict.ModelVersion = *version
		}
	}
	return ev, nil
}

// timeStreamQuery records a stream query's duration (the stream's
// queries have a budget of their own: see README, "Event stream").
func timeStreamQuery(query string, start time.Time) {
	obs.StreamQuery(query, time.Since(start))
}

// LastStreamPos is the newest position of the stream. Every event up to
// it is committed, and every event committed later comes after it (rows
// are numbered at commit, in commit order: migration 00016), so a stream
// that starts here and reads "after" misses nothing.
func (db *DB) LastStreamPos(ctx context.Context) (domain.StreamPos, error) {
	defer timeStreamQuery("last", time.Now())
	var p domain.StreamPos
	err := db.Pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM stream_events`).Scan(&p.Seq)
	return p, translate(err, "stream events")
}

// StreamEvents returns up to limit events after a position, every kind
// and every client's, in stream order: what one api replica fans out to
// its streams. A transaction that commits later than a read gets
// positions after every row that read returned, so the next read takes it.
func (db *DB) StreamEvents(ctx context.Context, after domain.StreamPos, limit int) ([]domain.StreamEvent, error) {
	defer timeStreamQuery("hub", time.Now())
	rows, err := db.Pool.Query(ctx, `SELECT `+streamEventColumns+` FROM stream_events s
		LEFT JOIN verdict_events e ON e.id = s.verdict_event_id
		WHERE s.seq > $1 ORDER BY s.seq LIMIT $2`, after.Seq, limit)
	if err != nil {
		return nil, translate(err, "stream events")
	}
	out, err := pgx.CollectRows(rows, scanStreamEvent)
	return out, translate(err, "stream events")
}

// StreamPosOf is the position of the event with the given wire id; false
// when the stream does not hold it (never was, or pruned).
func (db *DB) StreamPosOf(ctx context.Context, id int64) (domain.StreamPos, bool, error) {
	defer timeStreamQuery("position", time.Now())
	var p domain.StreamPos
	err := db.Pool.QueryRow(ctx, `SELECT seq FROM stream_events WHERE id = $1 AND seq IS NOT NULL`, id).Scan(&p.Seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.StreamPos{}, false, nil
	}
	return p, err == nil, translate(err, "stream events")
}

// ReplayStreamEvents returns up to limit events of f after a position, up
// to and including upTo (a position the hub reached), in stream order:
// what a stream resumed with Last-Event-ID missed. Every verdict_changed
// event is returned, and every alert event of the filter's client; of the screener events only each combination's
// newest (a screener event is a full snapshot that supersedes the older
// ones), and only when it is in the range: a combination refreshed after
// upTo has its newest event among the live ones that follow the replay.
//
// Its cost is the page's: the verdict events are read by position from an
// index, the screener events from stream_screener_latest (one row per
// combination), and a page resumes where the last ended.
func (db *DB) ReplayStreamEvents(ctx context.Context, f StreamFilter, after, upTo domain.StreamPos, limit int) ([]domain.StreamEvent, error) {
	defer timeStreamQuery("replay", time.Now())
	rows, err := db.Pool.Query(ctx, `WITH page AS (
			(SELECT s.id, s.seq FROM stream_events s
			WHERE $6 AND s.kind = 'verdict_changed' AND s.seq > $1 AND s.seq <= $2 AND s.market = ANY($3)
				AND (s.sandbox_client_id IS NULL OR s.sandbox_client_id = nullif($4, '')::uuid)
			ORDER BY s.seq LIMIT $5)
			UNION ALL
			(SELECT l.event_id, l.seq FROM stream_screener_latest l
			WHERE $7 AND l.seq > $1 AND l.seq <= $2 AND l.market = ANY($3)
			ORDER BY l.seq LIMIT $5)
			UNION ALL
			(SELECT s.id, s.seq FROM stream_events s
			WHERE $8 AND s.kind = 'alert' AND s.seq > $1 AND s.seq <= $2 AND s.market = ANY($3)
				AND s.client_id = nullif($9, '')::uuid
			ORDER BY s.seq LIMIT $5)
			ORDER BY seq LIMIT $5)
		SELECT `+streamEventColumns+` FROM page p JOIN stream_events s ON s.id = p.id
		LEFT JOIN verdict_events e ON e.id = s.verdict_event_id
		ORDER BY s.seq`,
		after.Seq, upTo.Seq, domain.MarketNames(f.Markets), f.SandboxClientID, limit,
		slices.Contains(f.Kinds, domain.EventVerdictChanged), slices.Contains(f.Kinds, domain.EventScreener),
		slices.Contains(f.Kinds, domain.EventAlert), f.ClientID)
	if err != nil {
		return nil, translate(err, "stream events")
	}
	out, err := pgx.CollectRows(rows, scanStreamEvent)
	return out, translate(err, "stream events")
}

// pruneBatch bounds the rows one statement of PruneStreamEvents deletes,
// so that each of its transactions stays short.
const pruneBatch = 5000

// PruneStreamEvents deletes the log's events older than before, a batch
// per transaction, and returns how many it deleted. It runs apart from the
// writers (the worker's stream:prune task), so no writer's transaction
// ever carries a prune.
func (db *DB) PruneStreamEvents(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for {
		tag, err := db.Pool.Exec(ctx, `DELETE FROM stream_events WHERE id IN (
			SELECT id FROM stream_events WHERE at < $1 LIMIT $2)`, before, pruneBatch)
		if err != nil {
			return total, translate(err, "stream events")
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < pruneBatch {
			break
		}
	}
	// A combination whose newest event is older than every event left has
	// nothing to replay. (By position: a refresh committing meanwhile
	// moves its row past the bound, and a recheck of the row keeps it.)
	_, err := db.Pool.Exec(ctx, `DELETE FROM stream_screener_latest
		WHERE seq < (SELECT min(seq) FROM stream_events)`)
	return total, translate(err, "stream events")
}

// SandboxPusher stores the pushes of POST /sandbox/verdict-change: Live
// is the service's database, Sandbox the sandbox's (the sandbox server's
// streams read its log).
type SandboxPusher struct {
	Live, Sandbox *DB
	// Alerts evaluates the client's alerts on the pushed change (nil: a
	// push fires no alert).
	Alerts AlertMatcher
}

// InsertSandboxVerdictEvent stores a verdict change pushed by a client's
// sandbox key, and the alerts of the client it fires (fireSandboxAlerts),
// in both databases: a verdict_events row marked with the
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
	v := domain.VerdictChange{Symbol: symbol, OldVerdict: oldVerdict, NewVerdict: newVerdict, OverallScore: score,
		ModelVersion: analytics.CurrentVersion().Name}
	tx, err := p.Live.Pool.Begin(ctx)
	if err != nil {
		return v, translate(err, "sandbox verdict event")
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit: a no-op
	if err := tx.QueryRow(ctx, `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at, sandbox_client_id, model_version)
		VALUES ($1, $2, $3, $4, $5, clock_timestamp(), $6, $7) RETURNING id, at`,
		string(m), symbol, oldVerdict, newVerdict, score, clientID, v.ModelVersion).Scan(&v.EventID, &v.At); err != nil {
		return v, translate(err, "sandbox verdict event")
	}
	v.At = v.At.UTC()
	// stream_written notifies the sandbox's channel at commit, as the
	// log's triggers do.
	if _, err := p.Sandbox.Pool.Exec(ctx, `INSERT INTO stream_events (kind, market, sandbox_client_id,
			push_event_id, push_symbol, push_old_verdict, push_new_verdict, push_overall_score, push_at)
		SELECT 'verdict_changed', $1, $2, $3, $4, $5, $6, $7, $8 FROM (SELECT stream_written(current_schema())) w`,
		string(m), clientID, v.EventID, symbol, oldVerdict, newVerdict, score, v.At); err != nil {
		return v, translate(err, "sandbox stream event")
	}
	if err := p.fireSandboxAlerts(ctx, tx, clientID, m, symbol, oldVerdict, newVerdict, score, v.At); err != nil {
		return v, err
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
