package app_test

import (
	"encoding/json"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/cmd/marketd/app"
)

// TestDemoKeyIsIdempotent: compose runs demo-key on every `up`; it creates
// the demo client once, shows a key only then (or on --new-key), and never
// makes a second client.
func TestDemoKeyIsIdempotent(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	mustRun(t, env, "migrate")
	var first struct {
		ClientID string `json:"client_id"`
		Created  bool   `json:"created"`
		Key      string `json:"key"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, env, "demo-key", "--org", "Compose demo", "--json")), &first); err != nil {
		t.Fatal(err)
	}
	if !first.Created || !strings.HasPrefix(first.Key, "msk_") {
		t.Fatalf("first demo-key: %+v, want a new client and a key", first)
	}
	out, errs, code := run(t, env, "demo-key", "--org", "Compose demo")
	if code != 0 || strings.TrimSpace(out) != "" || !strings.Contains(errs, first.ClientID) || !strings.Contains(errs, "keys issue") {
		t.Fatalf("second demo-key: exit %d, stdout %q, stderr %q: want no key, the client id and how to get a key", code, out, errs)
	}
	again := mustRun(t, env, "demo-key", "--org", "Compose demo", "--new-key")
	if !strings.HasPrefix(again, "msk_") || again == first.Key {
		t.Fatalf("demo-key --new-key printed %q", again)
	}
	var clients []struct {
		ID      string `json:"id"`
		OrgName string `json:"org_name"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, env, "clients", "list", "--json")), &clients); err != nil {
		t.Fatal(err)
	}
	if len(clients) != 1 || clients[0].ID != first.ClientID {
		t.Fatalf("after three demo-key runs: clients %+v, want only %s", clients, first.ClientID)
	}
}

// TestMigrateWaitsForPostgres: in compose, migrate may start while Postgres
// still initialises; with --wait it retries until Postgres answers instead
// of failing (and stopping the stack). Without --wait it fails at once.
func TestMigrateWaitsForPostgres(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	u, err := url.Parse(env["MARKET_DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing answers there yet
	u.Host = addr
	env["MARKET_DATABASE_URL"] = u.String()

	if _, _, code := run(t, env, "migrate"); code == 0 {
		t.Fatal("migrate without --wait succeeded with nothing listening")
	}
	done := make(chan string, 1)
	go func() {
		out, errs, code := run(t, env, "migrate", "--wait", "60s")
		if code != 0 {
			out = "exit " + errs
		}
		done <- out
	}()
	time.Sleep(time.Second) // migrate is retrying by now
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	t.Cleanup(func() { ln.Close() })
	go proxy(ln, target)
	select {
	case out := <-done:
		if !strings.Contains(out, "schema at version") {
			t.Fatalf("migrate --wait: %s", out)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("migrate --wait did not finish once Postgres answered")
	}
}

// proxy forwards every connection accepted on ln to target.
func proxy(ln net.Listener, target string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			s, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer s.Close()
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			_, _ = io.Copy(c, s)
		}()
	}
}

// TestDemoSecretKeyIsLoud: compose's default MARKET_SECRET_KEY is the
// explicit insecure-demo-key, which works (webhooks can be subscribed) and
// makes every role warn at start.
func TestDemoSecretKeyIsLoud(t *testing.T) {
	t.Parallel()
	cfg, err := app.LoadConfig(func(k string) string {
		return map[string]string{"MARKET_SECRET_KEY": app.DemoSecretKeyValue}[k]
	})
	if err != nil || !cfg.DemoSecretKey || len(cfg.SecretKey) != 32 {
		t.Fatalf("LoadConfig(insecure-demo-key) = demo %v, %d-byte key, %v", cfg.DemoSecretKey, len(cfg.SecretKey), err)
	}
	env := testEnv(t)
	mustRun(t, env, "migrate")
	env["MARKET_SECRET_KEY"] = app.DemoSecretKeyValue
	env["MARKET_LOG_LEVEL"] = "info"
	logs := &safeBuffer{}
	m := &app.Main{Getenv: func(k string) string { return env[k] }, Stdout: io.Discard, Stderr: logs}
	startRole(t, m, "scheduler")
	if !strings.Contains(logs.String(), `"level":"WARN","msg":"INSECURE: MARKET_SECRET_KEY=insecure-demo-key`) {
		t.Fatalf("scheduler with the demo key logged no warning:\n%s", logs.String())
	}
}

// TestAsynqmonWritableNeedsToken: a writable asynqmon without a token (or
// with a short one) is refused at start, naming the variable.
func TestAsynqmonWritableNeedsToken(t *testing.T) {
	t.Parallel()
	for _, token := range []string{"", "short"} {
		env := map[string]string{"MARKET_ASYNQMON_WRITABLE": "true", "MARKET_ASYNQMON_TOKEN": token}
		_, errs, code := run(t, env, "api")
		if code == 0 || !strings.Contains(errs, "MARKET_ASYNQMON_TOKEN") {
			t.Errorf("writable with token %q: exit %d, %q: want a refusal naming MARKET_ASYNQMON_TOKEN", token, code, errs)
		}
	}
	if _, errs, code := run(t, map[string]string{"MARKET_ASYNQMON_WRITABLE": "yes please"}, "api"); code == 0 || !strings.Contains(errs, "MARKET_ASYNQMON_WRITABLE") {
		t.Errorf("MARKET_ASYNQMON_WRITABLE=yes please: exit %d, %q", code, errs)
	}
}
