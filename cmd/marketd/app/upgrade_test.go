package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/store"
)

// readyzBody is /readyz's answer.
type readyzBody struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
	Schema struct {
		Version int64  `json:"version"`
		Binary  int64  `json:"binary"`
		Skew    string `json:"skew"`
	} `json:"schema"`
	Served   map[string]string `json:"served"`
	Unserved []string          `json:"unserved"`
}

func getReadyz(t *testing.T, m interface{ OpsAddr() string }) (int, readyzBody) {
	t.Helper()
	resp, err := http.Get("http://" + m.OpsAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body readyzBody
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// readyzProbed is /readyz once the postgres check has run.
func readyzProbed(t *testing.T, m interface{ OpsAddr() string }) (int, readyzBody) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, ready := getReadyz(t, m)
		if ready.Checks["postgres"] != "" || time.Now().After(deadline) {
			return code, ready
		}
	}
}

// TestReadyOnNewerSchema: a schema ahead of the binary (a newer release
// migrated it during a rolling upgrade) keeps the replica serving, and
// /readyz and marketd migrate report the skew.
func TestReadyOnNewerSchema(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	mustRun(t, env, "migrate")
	id := mustRun(t, env, "clients", "create", "--org", "Upgraded", "--tier", "business")
	key := mustRun(t, env, "keys", "issue", "--client", id)

	db, err := store.Open(context.Background(), env["MARKET_DATABASE_URL"], store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before, err := db.Schema(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	newer := before.Binary + 1
	if _, err := db.Pool.Exec(context.Background(),
		`INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, newer); err != nil {
		t.Fatal(err)
	}

	srv := startServer(t, env, "api")
	waitReady(t, srv)
	code, ready := getReadyz(t, srv)
	if code != http.StatusOK || ready.Checks["postgres"] != "ok" || ready.Schema.Version != newer || ready.Schema.Binary != before.Binary ||
		!strings.Contains(ready.Schema.Skew, "schema ahead by 1") || !strings.Contains(ready.Schema.Skew, "rolling upgrade") {
		t.Fatalf("readyz = %d %+v, want 200, postgres ok, schema %d, binary %d, ahead by 1", code, ready, newer, before.Binary)
	}
	if r := get(t, "http://"+srv.HTTPAddr()+"/api/v1/public/usage", key); r.status != http.StatusOK {
		t.Fatalf("/usage on a newer schema: %d %v", r.status, r.body)
	}
	if out := mustRun(t, env, "migrate"); !strings.Contains(out, "up to date") || !strings.Contains(out, "schema ahead by 1") {
		t.Fatalf("migrate on a newer schema printed %q, want up to date and the skew", out)
	}
}

// TestNotReadyOnOlderSchema: a schema lacking one of the binary's
// migrations keeps the replica not ready, naming the migration.
func TestNotReadyOnOlderSchema(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	mustRun(t, env, "migrate")
	db, err := store.Open(context.Background(), env["MARKET_DATABASE_URL"], store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := db.Schema(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The version row alone: the schema's tables stay, which readiness
	// does not look at.
	if _, err := db.Pool.Exec(context.Background(), `DELETE FROM goose_db_version WHERE version_id = $1`, s.Binary); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, env, "api")
	code, ready := readyzProbed(t, srv)
	want := fmt.Sprintf("lacks migration %05d", s.Binary)
	if code != http.StatusServiceUnavailable || ready.Status != "not_ready" || !strings.Contains(ready.Checks["postgres"], want) ||
		!strings.Contains(ready.Checks["postgres"], "marketd migrate") {
		t.Fatalf("readyz = %d %+v, want 503 naming migration %d and marketd migrate", code, ready, s.Binary)
	}
}

// TestEditedMigrationRefused: a database that applied another file for one
// of the binary's migrations (a landed migration edited since) makes
// marketd migrate fail and /readyz answer 503, both naming the version.
func TestEditedMigrationRefused(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	mustRun(t, env, "migrate")
	db, err := store.Open(context.Background(), env["MARKET_DATABASE_URL"], store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Pool.Exec(context.Background(), `UPDATE migration_checksums SET sha256 = repeat('0', 64) WHERE version = 10`); err != nil {
		t.Fatal(err)
	}
	const want = "migration 00010 was applied from another file than this binary's 00010_stream.sql"
	if _, errs, code := run(t, env, "migrate"); code == 0 || !strings.Contains(errs, want) {
		t.Fatalf("migrate: exit %d, stderr %q, want a failure saying %q", code, errs, want)
	}
	srv := startServer(t, env, "api")
	code, ready := readyzProbed(t, srv)
	if code != http.StatusServiceUnavailable || ready.Status != "not_ready" || !strings.Contains(ready.Checks["postgres"], want) {
		t.Fatalf("readyz = %d %+v, want 503 saying %q", code, ready, want)
	}
}
