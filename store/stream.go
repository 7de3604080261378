package store

import (
	"context"
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
	// SandboxClientID selects that client's sandbox events instead of the
	// service's own ("" = the service's own). The two never mix.
	SandboxClientID string
}

const streamEventColumns = `s.id, s.kind, s.market, s.exchange, s.instrument, s.sandbox_client_id::text, s.at,
	e.id, e.symbol, e.old_verdict, e.new_verdict, e.overall_score, e.at`

func scanStreamEvent(row pgx.CollectableRow) (domain.StreamEvent, error) {
	var (
		ev                            domain.StreamEvent
		market                        string
		exchange, instrument, sandbox *string
		eid, score                    *int64
		symbol, oldV, newV            *string
		eat                           *time.Time
	)
	if err := row.Scan(&ev.ID, &ev.Kind, &market, &exchange, &instrument, &sandbox, &ev.At,
		&eid, &symbol, &oldV, &newV, &score, &eat); err != nil {
		return ev, err
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
			OverallScore: int(*score), At: eat.UTC()}
	}
	return ev, nil
}

// LastStreamEventID is the newest event id of the stream (0 when empty).
// Every event with a lower id is committed: a stream that starts here and
// reads "after id" misses nothing.
func (db *DB) LastStreamEventID(ctx context.Context) (int64, error) {
	var id int64
	err := db.Pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM stream_events`).Scan(&id)
	return id, translate(err, "stream events")
}

// StreamEvents returns up to limit events after id, every kind and every
// client's, oldest first: what one api replica fans out to its streams.
func (db *DB) StreamEvents(ctx context.Context, afterID int64, limit int) ([]domain.StreamEvent, error) {
	rows, err := db.Pool.Query(ctx, `SELECT `+streamEventColumns+` FROM stream_events s
		LEFT JOIN verdict_events e ON e.id = s.verdict_event_id
		WHERE s.id > $1 ORDER BY s.id LIMIT $2`, afterID, limit)
	if err != nil {
		return nil, translate(err, "stream events")
	}
	out, err := pgx.CollectRows(rows, scanStreamEvent)
	return out, translate(err, "stream events")
}

// ReplayStreamEvents returns up to limit events of f with afterID < id <=
// upToID, oldest first: what a stream resumed with Last-Event-ID missed.
// Every verdict_changed event is returned; of the screener events only the
// newest of each combination in the range, since a screener event is a
// full snapshot that supersedes the older ones.
func (db *DB) ReplayStreamEvents(ctx context.Context, f StreamFilter, afterID, upToID int64, limit int) ([]domain.StreamEvent, error) {
	rows, err := db.Pool.Query(ctx, `WITH r AS (
			SELECT * FROM stream_events
			WHERE id > $1 AND id <= $2 AND market = ANY($3) AND kind = ANY($4)
				AND sandbox_client_id IS NOT DISTINCT FROM nullif($5, '')::uuid
		)
		SELECT `+streamEventColumns+` FROM r s LEFT JOIN verdict_events e ON e.id = s.verdict_event_id
		WHERE s.kind <> 'screener'
			OR s.id IN (SELECT max(id) FROM r WHERE kind = 'screener' GROUP BY market, exchange, instrument)
		ORDER BY s.id LIMIT $6`,
		afterID, upToID, domain.MarketNames(f.Markets), f.Kinds, f.SandboxClientID, limit)
	if err != nil {
		return nil, translate(err, "stream events")
	}
	out, err := pgx.CollectRows(rows, scanStreamEvent)
	return out, translate(err, "stream events")
}

// InsertSandboxVerdictEvent stores a verdict change pushed by a client's
// sandbox key: a verdict_events row marked with the client, which the
// stream hands to that client's sandbox streams and the webhook fan-out
// to that client's subscriptions only.
func (db *DB) InsertSandboxVerdictEvent(ctx context.Context, clientID string, m domain.Market, symbol, oldVerdict, newVerdict string, score int) (domain.VerdictChange, error) {
	v := domain.VerdictChange{Symbol: symbol, OldVerdict: oldVerdict, NewVerdict: newVerdict, OverallScore: score}
	err := db.Pool.QueryRow(ctx, `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at, sandbox_client_id)
		VALUES ($1, $2, $3, $4, $5, clock_timestamp(), $6) RETURNING id, at`,
		string(m), symbol, oldVerdict, newVerdict, score, clientID).Scan(&v.EventID, &v.At)
	v.At = v.At.UTC()
	return v, translate(err, "sandbox verdict event")
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
