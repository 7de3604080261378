package store

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/obs"
)

// AlertAsset is what an alert's condition reads of one asset: its report
// in every style scored (with results) and its screener row.
type AlertAsset struct {
	Market  domain.Market
	Symbol  string
	Reports map[analytics.Style]*AnalyticsRecord
	// Ticker is the screener row of the report's combination (nil when
	// the screener has none).
	Ticker *domain.Ticker
	// Prepared is the matcher's own form of the asset, built on first use
	// and kept for the other alerts evaluated on it.
	Prepared any
}

// AlertMatcher resolves alert conditions. It is called inside the
// transaction that saves a rescoring, so it must be quick.
type AlertMatcher interface {
	// Condition is a's condition, resolved once for the many assets and
	// saves it is evaluated on: the conditions a matcher that is a pointer
	// resolved are kept with this process's copy of the alerts (for that
	// pointer), until an alert changes.
	Condition(a domain.Alert) AlertCondition
}

// AlertCondition is one alert's condition. Many saves may use it at once,
// each on its own assets; one asset is evaluated by one goroutine at a
// time.
type AlertCondition interface {
	// Match reports whether the condition holds on the asset. An error
	// (the condition does not compile, or went past its cost limit)
	// leaves the alert's state on the asset as it was.
	Match(asset *AlertAsset) (bool, error)
	// Read is the value of every variable the condition reads on the
	// asset (the payload of the event when it fires).
	Read(asset *AlertAsset) map[string]any
	// Reads reports whether a rescoring in style can change the value of
	// the condition (false: it reads no field of that style's report).
	Reads(style analytics.Style) bool
}

// SaveAnalyticsAlerting is SaveAnalytics with the alerts of the saved
// assets evaluated in the same transaction: an alert whose condition
// turns true on an asset fires (an alert_events row, delivered like a
// verdict event), and the alert's state on the asset is written. So a
// verdict event and the alert it makes true come from the same rescoring
// and commit together, and a worker that dies after the save has neither
// lost nor doubled an alert. Without alerts on the markets of recs it is
// SaveAnalytics. It returns the verdict events written.
//
// The reports of the saved assets, in every style, are locked in primary
// key order (the order every saver locks them in) before they are read:
// two runs of different styles on one asset evaluate one after the other,
// each on the other's committed report.
func (db *DB) SaveAnalyticsAlerting(ctx context.Context, recs []AnalyticsRecord, prev map[string]AnalyticsRecord, m AlertMatcher) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	if m == nil {
		return db.SaveAnalytics(ctx, recs, prev)
	}
	recs, c, err := newSaveColumns(recs, prev)
	if err != nil {
		return 0, err
	}
	var n int
	err = retryDeadlock(func() error {
		var err error
		n, err = db.saveAlerting(ctx, recs, prev, c, m)
		return err
	})
	return n, err
}

func (db *DB) saveAlerting(ctx context.Context, recs []AnalyticsRecord, prev map[string]AnalyticsRecord, c *saveColumns, m AlertMatcher) (int, error) {
	// A connection of its own rather than the pool's transaction: the
	// save's last statements and its COMMIT go in one round trip
	// (alertWrites.commit), and the transaction then needs no Commit.
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		return 0, translate(err, "analytics")
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, translate(err, "analytics")
	}
	defer func() {
		if conn.Conn().PgConn().TxStatus() != 'I' { // not committed (nor rolled back by a failed COMMIT)
			tx.Rollback(ctx) //nolint:errcheck // the error is the save's
		}
	}()
	markets := uniqueSorted(recs, func(r AnalyticsRecord) string { return string(r.Market) })
	symbols := uniqueSorted(recs, func(r AnalyticsRecord) string { return r.Symbol })
	var gen int64
	var xid int64
	var fired map[domain.Market]int
	if err := tx.QueryRow(ctx, `SELECT (SELECT n FROM alert_generation), pg_current_xact_id()::text::bigint % 4294967296`).Scan(&gen, &xid); err != nil {
		return 0, translate(err, "alerts")
	}
	alerts, conds, named, err := db.liveAlerts(ctx, tx, gen, markets, symbols, m)
	if err != nil {
		return 0, err
	}
	if len(alerts) == 0 {
		tag, err := tx.Exec(ctx, saveAnalyticsSQL, c.args()...)
		if err != nil {
			return 0, translate(err, "analytics")
		}
		return int(tag.RowsAffected()), translate(tx.Commit(ctx), "analytics")
	}
	before, versions, err := lockReports(ctx, tx, markets, symbols, uniqueSorted(recs, func(r AnalyticsRecord) string { return string(r.Style) }))
	if err != nil {
		return 0, err
	}
	// A record is stored when the report it replaces is the one its run
	// read (the statement's own condition, on the rows now locked).
	var saved []AnalyticsRecord
	var assets []assetKey
	for _, r := range recs {
		old, had := before[assetKey{r.Market, r.Symbol}][r.Style]
		p, read := prev[r.Symbol]
		if !had || read && old.UpdatedAt.Equal(pgTime(p.UpdatedAt)) && !old.CandleTime.After(pgTime(r.CandleTime)) {
			saved = append(saved, r)
			if k := (assetKey{r.Market, r.Symbol}); !slices.Contains(assets, k) {
				assets = append(assets, k)
			}
		}
	}
	// The reports' results are read before the save replaces them: read
	// after, the report a record replaces would be the record itself, and
	// an alert seen for the first time would compare the rescoring with
	// itself (and not fire) whenever the results were not in the cache.
	if len(saved) > 0 {
		if err := db.withResults(ctx, tx, before, versions, assets); err != nil {
			return 0, err
		}
	}
	tag, err := tx.Exec(ctx, saveAnalyticsSQL, c.args()...)
	if err != nil {
		return 0, translate(err, "analytics")
	}
	var w *alertWrites
	if len(saved) > 0 {
		keep, writes, err := db.evaluateAlerts(ctx, tx, m, alerts, conds, named, before, versions, gen, saved)
		if err != nil {
			return 0, err
		}
		// What the save leaves is kept before its commit, under its
		// transaction id: a save waiting for these rows' locks proceeds
		// the moment they are released, and must find it. Should the
		// writes or the commit fail, the rows keep their versions and
		// nothing kept matches them.
		keep(uint32(xid))
		w = writes
		for _, r := range saved {
			if r.Result == nil {
				continue
			}
			res := r.Result
			if res.ModelVersion == "" {
				cp := *res
				cp.ModelVersion = unversioned
				res = &cp
			}
			db.results.put(reportKey{r.Market, r.Style, r.Symbol}, uint32(xid), pgTime(r.UpdatedAt), res)
		}
	}
	fired, err = w.commit(ctx, tx)
	if err != nil {
		return 0, err
	}
	db.alertsFired(fired)
	return int(tag.RowsAffected()), nil
}

// OnAlertsFired sets f to be called after each save that fired alerts has
// committed, with how many it fired, in the saving goroutine, which waits
// for it: f must be quick (a benchmark times the alerts' commits with it).
// nil removes it.
func (db *DB) OnAlertsFired(f func(n int)) {
	if f == nil {
		db.onFired.Store(nil)
		return
	}
	db.onFired.Store(&f)
}

// alertsFired counts a committed save's alerts, by market.
func (db *DB) alertsFired(fired map[domain.Market]int) {
	n := 0
	for m, k := range fired {
		obs.AlertsFired(string(m), k)
		n += k
	}
	if f := db.onFired.Load(); f != nil && n > 0 {
		(*f)(n)
	}
}

// styleBit is style's bit in a set of styles (analytics.Styles' order).
func styleBit(style analytics.Style) uint8 {
	if k := slices.Index(analytics.Styles, style); k >= 0 {
		return 1 << k
	}
	return 0
}

// pgTime is t as Postgres stores it (microseconds).
func pgTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

type assetKey struct {
	market domain.Market
	symbol string
}

func uniqueSorted(recs []AnalyticsRecord, key func(AnalyticsRecord) string) []string {
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, key(r))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// liveAlertsSQL is liveAlerts read from the table: alert_symbols and the index
// alerts_whole_market find them without reading the market's others. The
// client is checked by a subquery per alert, not a join: the plan stays
// index lookups whatever the statistics say (a join planned on a new
// table's missing statistics took 700 ms).
func liveAlertsSQL(ctx context.Context, tx pgx.Tx, markets, symbols []string) ([]domain.Alert, error) {
	rows, err := tx.Query(ctx, `SELECT `+alertColumns+` FROM alerts a
		WHERE a.id = ANY (ARRAY(
				SELECT alert_id FROM alert_symbols WHERE market = ANY ($1) AND symbol = ANY ($2)
				UNION
				SELECT id FROM alerts WHERE market = ANY ($1) AND symbols IS NULL))
			AND coalesce((SELECT c.status = 'active' AND (c.contract_expires_at IS NULL OR c.contract_expires_at > now())
					AND a.market = ANY (c.markets)
				FROM clients c WHERE c.id = a.client_id), false)
		ORDER BY a.id`, markets, symbols)
	if err != nil {
		return nil, translate(err, "alerts")
	}
	out, err := pgx.CollectRows(rows, scanAlert)
	return out, translate(err, "alerts")
}

// evaluateAlerts evaluates the alerts on the saved assets, writes their
// states and the events of those that fire. namedBy is, when the alerts
// come from this process's copy, the alerts that name each asset (places
// in alerts); nil, they are found here. versions are the locked
// reports' row versions and gen the alerts' generation, which validate the
// states kept in db.states; keep, called with the save's transaction id,
// keeps the assets' states there (valid once the save has committed).
func (db *DB) evaluateAlerts(ctx context.Context, tx pgx.Tx, m AlertMatcher, alerts []domain.Alert, conds []AlertCondition,
	namedBy map[assetKey][]int, before map[assetKey]map[analytics.Style]*AnalyticsRecord, versions map[reportKey]uint32, gen int64,
	saved []AnalyticsRecord) (keep func(xid uint32), w *alertWrites, err error) {
	keep = func(uint32) {}
	if len(saved) == 0 {
		return keep, nil, nil
	}
	// One asset per (market, symbol): its reports after the save (a run
	// saves one style; several records of one asset merge).
	type change struct {
		key           assetKey
		before, after *AlertAsset
		at            time.Time
		rec           AnalyticsRecord
		styles        []analytics.Style
		saved         uint8 // the styles saved, a bit each (analytics.Styles' order)
	}
	var changes []*change
	byKey := map[assetKey]*change{}
	for _, r := range saved {
		k := assetKey{r.Market, r.Symbol}
		ch := byKey[k]
		if ch == nil {
			ch = &change{key: k, before: &AlertAsset{Market: r.Market, Symbol: r.Symbol, Reports: before[k]},
				after: &AlertAsset{Market: r.Market, Symbol: r.Symbol, Reports: map[analytics.Style]*AnalyticsRecord{}}, rec: r}
			for s, rep := range before[k] {
				ch.after.Reports[s] = rep
			}
			byKey[k] = ch
			changes = append(changes, ch)
		}
		r := r
		ch.after.Reports[r.Style] = &r
		ch.styles = append(ch.styles, r.Style)
		ch.saved |= styleBit(r.Style)
		if at := pgTime(r.UpdatedAt); at.After(ch.at) {
			ch.at = at
		}
	}
	if err := attachTickers(ctx, tx, changes, func(ch *change) (*AlertAsset, *AlertAsset, AnalyticsRecord) {
		return ch.before, ch.after, ch.rec
	}); err != nil {
		return keep, nil, err
	}
	// The alerts of each asset: those on its whole market and those that
	// name it, among the ones whose condition a saved style can change.
	// (The assets by symbol: a string key hashes faster, and the alerts
	// name thousands of symbols a save.)
	whole := map[domain.Market][]int{}
	named := make([][]int, len(changes))
	var bySymbol map[string][]int
	if namedBy != nil {
		for j, ch := range changes {
			named[j] = namedBy[ch.key]
		}
	} else {
		bySymbol = make(map[string][]int, len(changes))
		for j, ch := range changes {
			bySymbol[ch.key.symbol] = append(bySymbol[ch.key.symbol], j)
		}
	}
	for i, a := range alerts {
		if a.Symbols == nil {
			whole[a.Market] = append(whole[a.Market], i)
			continue
		}
		if namedBy != nil {
			continue
		}
		for _, sym := range a.Symbols {
			for _, j := range bySymbol[sym] {
				if changes[j].key.market == a.Market && (len(named[j]) == 0 || named[j][len(named[j])-1] != i) {
					named[j] = append(named[j], i)
				}
			}
		}
	}
	type pair struct {
		ch    *change
		alert *domain.Alert
		cond  AlertCondition
		key   int // alert index × len(changes) + change index
	}
	// Whether a rescoring in a style can change an alert's condition,
	// asked once per alert and style of the save (the conditions kept by
	// the index, or resolved here).
	if conds == nil {
		conds = make([]AlertCondition, len(alerts))
		for i, a := range alerts {
			conds[i] = m.Condition(a)
		}
	}
	var savedStyles uint8
	for _, ch := range changes {
		savedStyles |= ch.saved
	}
	reads := make([]uint8, len(alerts)) // the saved styles each alert reads, a bit each
	for i := range alerts {
		for k, st := range analytics.Styles {
			if savedStyles&(1<<k) != 0 && conds[i].Reads(st) {
				reads[i] |= 1 << k
			}
		}
	}
	n := 0 // at most
	for j, ch := range changes {
		n += len(whole[ch.key.market]) + len(named[j])
	}
	pairs := make([]pair, 0, n)
	for j, ch := range changes {
		for _, list := range [2][]int{whole[ch.key.market], named[j]} {
			for _, i := range list {
				if reads[i]&ch.saved == 0 {
					continue
				}
				pairs = append(pairs, pair{ch, &alerts[i], conds[i], i*len(changes) + j})
			}
		}
	}
	if len(pairs) == 0 {
		return keep, nil, nil
	}
	// Each asset's states (by alert id): kept from its last save in this
	// process while its reports are the versions that save left, read
	// otherwise.
	states := make([]map[string]domain.AlertState, len(changes))
	var symbols []string
	changeIdx := make(map[string]int, len(changes))
	for j, ch := range changes {
		if states[j] = db.states.take(ch.key, gen, before[ch.key], versions); states[j] == nil {
			states[j] = map[string]domain.AlertState{}
			symbols = append(symbols, ch.key.symbol)
			changeIdx[ch.key.symbol] = j
		}
	}
	if len(symbols) > 0 {
		if err := alertStates(ctx, tx, symbols, func(alertID, symbol string, s domain.AlertState) {
			if j, ok := changeIdx[symbol]; ok {
				states[j][alertID] = s
			}
		}); err != nil {
			return keep, nil, err
		}
	}
	w = &alertWrites{}
	for _, p := range pairs {
		a, ch := *p.alert, p.ch
		matched, err := p.cond.Match(ch.after)
		if err != nil {
			continue
		}
		j := p.key % len(changes)
		st := states[j][a.ID]
		if !st.Known && !matched {
			continue // false so far: nothing to keep
		}
		baseline := matched // first sight of the asset: no change
		if !st.Known && len(ch.before.Reports) > 0 {
			if b, err := p.cond.Match(ch.before); err == nil {
				baseline = b
			}
		}
		next, fire := st.Next(a, matched, baseline, ch.at)
		if next.Changed(st) {
			w.state(a.ID, ch.key.symbol, next, ch.at, st.Known)
			states[j][a.ID] = next
		}
		if fire {
			w.event(a, ch.key.symbol, ch.at, p.cond.Read(ch.after))
		}
	}
	return func(xid uint32) {
		for j, ch := range changes {
			e := &assetStates{gen: gen, versions: map[analytics.Style]uint32{}, states: states[j]}
			for st := range before[ch.key] {
				e.versions[st] = versions[reportKey{ch.key.market, st, ch.key.symbol}]
			}
			for _, st := range ch.styles {
				e.versions[st] = xid // the rows this save stored
			}
			db.states.put(ch.key, e)
		}
	}, w, nil
}

// attachTickers sets the screener rows of the assets: each report's own
// combination (exchange and instrument).
func attachTickers[T any](ctx context.Context, tx pgx.Tx, items []T, assets func(T) (before, after *AlertAsset, rec AnalyticsRecord)) error {
	var mk, ex, in, sy []string
	for _, it := range items {
		_, _, r := assets(it)
		mk, ex, in, sy = append(mk, string(r.Market)), append(ex, r.Exchange), append(in, r.Instrument), append(sy, r.Symbol)
	}
	rows, err := tx.Query(ctx, `SELECT t.market, t.symbol, t.price, t.change_pct, t.volume, t.updated_at
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS k(market, exchange, instrument, symbol)
		JOIN tickers t ON t.market = k.market AND t.exchange = k.exchange AND t.instrument = k.instrument AND t.symbol = k.symbol`,
		mk, ex, in, sy)
	if err != nil {
		return translate(err, "tickers")
	}
	got := map[assetKey]*domain.Ticker{}
	for rows.Next() {
		var t domain.Ticker
		var market string
		if err := rows.Scan(&market, &t.Symbol, &t.Price, &t.ChangePct, &t.Volume, &t.UpdatedAt); err != nil {
			rows.Close()
			return translate(err, "tickers")
		}
		t.UpdatedAt = t.UpdatedAt.UTC()
		got[assetKey{domain.Market(market), t.Symbol}] = &t
	}
	if err := rows.Err(); err != nil {
		return translate(err, "tickers")
	}
	for _, it := range items {
		b, a, r := assets(it)
		t := got[assetKey{r.Market, r.Symbol}]
		b.Ticker, a.Ticker = t, t
	}
	return nil
}

// alertStates reads the states on the assets (symbols), by symbol (index
// alert_states_symbol), and hands each to put: the states of one asset
// are written only by the saves that hold its reports' locks, so they stay
// as read. (A symbol's states include those of other markets' alerts:
// they are never looked up, an alert being of one market.)
func alertStates(ctx context.Context, tx pgx.Tx, symbols []string, put func(alertID, symbol string, s domain.AlertState)) error {
	rows, err := tx.Query(ctx, `SELECT alert_id::text, symbol, matched, last_fired_at FROM alert_states WHERE symbol = ANY ($1)`, symbols)
	if err != nil {
		return translate(err, "alert states")
	}
	defer rows.Close()
	var alertID, symbol string
	for rows.Next() {
		s := domain.AlertState{Known: true}
		if err := rows.Scan(&alertID, &symbol, &s.Matched, &s.LastFiredAt); err != nil {
			return translate(err, "alert states")
		}
		put(alertID, symbol, s)
	}
	return translate(rows.Err(), "alert states")
}

// alertWrites collects the states and events of one evaluation, written
// as one statement each.
type alertWrites struct {
	// The states that have a row (updated) and those that do not yet
	// (inserted).
	up, ins stateWrites

	evAlert, evName, evClient, evMarket, evSymbol []string
	evAt                                          []time.Time
	evRead                                        []string
}

// stateWrites are states as one array per column.
type stateWrites struct {
	alert, symbol []string
	matched       []bool
	at            []time.Time
	fired         []*time.Time
}

func (c *stateWrites) add(alertID, symbol string, s domain.AlertState, at time.Time) {
	c.alert, c.symbol, c.matched = append(c.alert, alertID), append(c.symbol, symbol), append(c.matched, s.Matched)
	c.at, c.fired = append(c.at, at), append(c.fired, s.LastFiredAt)
}

// state records the alert's new state on the asset; stored tells whether
// the state has a row (it was read, or kept from a save, as known).
func (w *alertWrites) state(alertID, symbol string, s domain.AlertState, at time.Time, stored bool) {
	if stored {
		w.up.add(alertID, symbol, s, at)
	} else {
		w.ins.add(alertID, symbol, s, at)
	}
}

func (w *alertWrites) event(a domain.Alert, symbol string, at time.Time, read map[string]any) {
	raw := readJSON(read)
	w.evAlert, w.evName, w.evClient = append(w.evAlert, a.ID), append(w.evName, a.Name), append(w.evClient, a.ClientID)
	w.evMarket, w.evSymbol = append(w.evMarket, string(a.Market)), append(w.evSymbol, symbol)
	w.evAt, w.evRead = append(w.evAt, at.UTC()), append(w.evRead, raw)
}

// commit writes the states and the events (none for a nil w) and
// commits tx, in one round trip, and returns the events inserted, by
// market.
//
// The alert events' statement takes the stream's lock (their statement
// trigger numbers them: docs/stream-order.md), held until the commit has
// ended, and every saver of the close with alerts to write waits for it.
// The COMMIT sent with the statements runs the moment they end, where a
// COMMIT of its own waited for a round trip and for this goroutine to be
// scheduled again on a busy worker.
func (w *alertWrites) commit(ctx context.Context, tx pgx.Tx) (fired map[domain.Market]int, err error) {
	b := &pgx.Batch{}
	if w != nil && len(w.up.alert) > 0 {
		// A state row is updated in place: its key does not change, so
		// the alert's row is not checked (a close updates tens of
		// thousands). A row an alert's delete has taken meanwhile is gone,
		// and the update passes it by.
		b.Queue(`UPDATE alert_states s SET matched = u.matched, evaluated_at = u.evaluated_at,
				last_fired_at = u.last_fired_at
			FROM unnest($1::text[]::uuid[], $2::text[], $3::bool[], $4::timestamptz[], $5::timestamptz[])
				AS u(alert_id, symbol, matched, evaluated_at, last_fired_at)
			WHERE s.alert_id = u.alert_id AND s.symbol = u.symbol`,
			w.up.alert, w.up.symbol, w.up.matched, w.up.at, w.up.fired).Exec(func(pgconn.CommandTag) error { return nil })
	}
	if w != nil && len(w.ins.alert) > 0 {
		// Only the states of alerts that still exist, locked against a
		// delete until the commit: an alert deleted while the save ran
		// (after its alerts were read) is passed by, and one deleted
		// after takes the states with it (its delete waits for the lock;
		// the states have no foreign key, migration 00037: its check
		// locked the same row again, a query per state).
		b.Queue(`INSERT INTO alert_states (alert_id, symbol, matched, evaluated_at, last_fired_at)
			SELECT u.* FROM unnest($1::text[]::uuid[], $2::text[], $3::bool[], $4::timestamptz[], $5::timestamptz[])
				AS u(alert_id, symbol, matched, evaluated_at, last_fired_at)
			JOIN alerts a ON a.id = u.alert_id
			FOR KEY SHARE OF a
			ON CONFLICT (alert_id, symbol) DO UPDATE SET matched = excluded.matched, evaluated_at = excluded.evaluated_at,
				last_fired_at = excluded.last_fired_at`,
			w.ins.alert, w.ins.symbol, w.ins.matched, w.ins.at, w.ins.fired).Exec(func(pgconn.CommandTag) error { return nil })
	}
	if w != nil && len(w.evAlert) > 0 {
		// The events inserted, by market (one already stored for the same
		// alert, asset and instant is not), of clients that exist: the
		// events have no foreign key (migration 00036), and a client
		// deleted while this save ran has had its events deleted by then
		// or has them deleted once the save commits (its alerts' states,
		// written above, hold the delete back until then).
		b.Queue(`WITH ins AS (
				INSERT INTO alert_events (alert_id, alert_name, client_id, market, symbol, at, read, sandbox)
				SELECT a, n, c, m, s, t, r::jsonb, false FROM unnest($1::text[]::uuid[], $2::text[], $3::text[]::uuid[], $4::text[], $5::text[], $6::timestamptz[], $7::text[])
					AS e(a, n, c, m, s, t, r)
				WHERE EXISTS (SELECT FROM clients k WHERE k.id = e.c)
				ORDER BY m, s, a
				ON CONFLICT (alert_id, symbol, at) DO NOTHING
				RETURNING market)
			SELECT market, count(*) FROM ins GROUP BY market`,
			w.evAlert, w.evName, w.evClient, w.evMarket, w.evSymbol, w.evAt, w.evRead).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var m string
				var n int
				if err := rows.Scan(&m, &n); err != nil {
					return err
				}
				if fired == nil {
					fired = map[domain.Market]int{}
				}
				fired[domain.Market(m)] += n
			}
			return rows.Err()
		})
	}
	b.Queue(`COMMIT`).Exec(func(tag pgconn.CommandTag) error {
		if tag.String() == "ROLLBACK" {
			return pgx.ErrTxCommitRollback
		}
		return nil
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, translate(err, "alert events")
	}
	return fired, nil
}

// fireSandboxAlerts fires the client's alerts on a sandbox push, in the
// push's transaction (tx, the service's database): the asset is the
// sandbox's, its default-style report taking the pushed verdict and score
// (before: the old verdict). An alert whose condition is false before and
// true after fires (no state, no cooldown: a push is a test). Each firing
// is an alert_events row marked sandbox (the live worker delivers it to
// the client's webhooks) and a row in the sandbox's stream log, for the
// client's sandbox streams.
func (p SandboxPusher) fireSandboxAlerts(ctx context.Context, tx pgx.Tx, clientID string, m domain.Market, symbol, oldVerdict, newVerdict string,
	score int, at time.Time) error {
	if p.Alerts == nil {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT `+alertColumns+` FROM alerts a WHERE a.client_id = $1 AND a.market = $2 ORDER BY a.id`, clientID, string(m))
	if err != nil {
		return translate(err, "alerts")
	}
	alerts, err := pgx.CollectRows(rows, scanAlert)
	if err != nil || len(alerts) == 0 {
		return translate(err, "alerts")
	}
	rows, err = p.Sandbox.Pool.Query(ctx, `SELECT `+analyticsColumns+`, result FROM analytics_reports WHERE market = $1 AND symbol = $2`,
		string(m), symbol)
	if err != nil {
		return translate(err, "analytics")
	}
	reports, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AnalyticsRecord, error) { return scanAnalytics(row, true) })
	if err != nil {
		return translate(err, "analytics")
	}
	before := &AlertAsset{Market: m, Symbol: symbol, Reports: map[analytics.Style]*AnalyticsRecord{}}
	after := &AlertAsset{Market: m, Symbol: symbol, Reports: map[analytics.Style]*AnalyticsRecord{}}
	for i := range reports {
		before.Reports[reports[i].Style], after.Reports[reports[i].Style] = &reports[i], &reports[i]
	}
	forced := func(verdict string, score int) *AnalyticsRecord {
		var r AnalyticsRecord
		res := analytics.Result{}
		if cur := before.Reports[analytics.DefaultStyle]; cur != nil {
			r = *cur
			if cur.Result != nil {
				res = *cur.Result
			}
		} else {
			r = AnalyticsRecord{Market: m, Style: analytics.DefaultStyle, Symbol: symbol}
		}
		res.Verdict, res.OverallScore = analytics.Verdict(verdict), score
		r.Verdict, r.OverallScore, r.Result = res.Verdict, score, &res
		return &r
	}
	oldScore := score
	if cur := before.Reports[analytics.DefaultStyle]; cur != nil {
		oldScore = cur.OverallScore
	}
	before.Reports[analytics.DefaultStyle] = forced(oldVerdict, oldScore)
	after.Reports[analytics.DefaultStyle] = forced(newVerdict, score)
	for _, a := range alerts {
		if !a.Watches(symbol) {
			continue
		}
		cond := p.Alerts.Condition(a)
		now, err := cond.Match(after)
		if err != nil || !now {
			continue
		}
		if was, err := cond.Match(before); err != nil || was {
			continue
		}
		read := cond.Read(after)
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO alert_events (alert_id, alert_name, client_id, market, symbol, at, read, sandbox)
			VALUES ($1, $2, $3, $4, $5, $6, $7, true) RETURNING id`,
			a.ID, a.Name, clientID, string(m), symbol, at, read).Scan(&id); err != nil {
			return translate(err, "sandbox alert event")
		}
		if _, err := p.Sandbox.Pool.Exec(ctx, `INSERT INTO stream_events (kind, market, sandbox_client_id, client_id, alert_event_id, payload)
			SELECT 'alert', $1, $2, $2, $3, jsonb_build_object('alert_id', $4::text, 'alert_name', $5::text, 'symbol', $6::text,
				'at', $7::timestamptz, 'values', $8::jsonb)
			FROM (SELECT stream_written(current_schema())) w`,
			string(m), clientID, id, a.ID, a.Name, symbol, at, read); err != nil {
			return translate(err, "sandbox stream event")
		}
	}
	return nil
}
