package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
)

// firstSkewTolerantRelease is the first commit whose readiness accepts a
// schema ahead of its binary. Releases before it answer 503 on any newer
// schema, so the previous release tested is never older than it.
const firstSkewTolerantRelease = "e331eddf2ceb7cdbbad40654db5d9163f70817ce"

// git runs git at the repository's top and returns its trimmed output.
func git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", ".."}, args...)...) // e2e/ is a top-level directory
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("git %s: %v: %s (the test needs the repository's history: a full clone)", strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// previousRelease is the commit before the newest one that added a
// migration, or firstSkewTolerantRelease when that commit does not
// descend from it.
func previousRelease(t *testing.T) string {
	t.Helper()
	added := git(t, "log", "-1", "--diff-filter=A", "--format=%H", "--", "migrations/*.sql")
	if added == "" {
		t.Fatal("git log finds no commit that added a migration: the test needs the repository's history (a full clone)")
	}
	prev := git(t, "rev-parse", added+"^")
	if exec.Command("git", "-C", "..", "cat-file", "-e", firstSkewTolerantRelease+"^{commit}").Run() != nil {
		t.Fatalf("commit %s (firstSkewTolerantRelease) is not in this repository: the test needs the full history; "+
			"if the history was rewritten, set it to the first commit whose readiness accepts a newer schema", firstSkewTolerantRelease)
	}
	if exec.Command("git", "-C", "..", "merge-base", "--is-ancestor", firstSkewTolerantRelease, prev).Run() != nil {
		t.Logf("the commit before %.12s (the newest to add a migration) does not descend from skew-tolerant readiness: testing %.12s",
			added, firstSkewTolerantRelease)
		return firstSkewTolerantRelease
	}
	return prev
}

// buildRelease builds marketd at commit into dir, from an export of the
// commit's tree (git archive: no worktree to clean up).
func buildRelease(t *testing.T, commit, dir string) string {
	t.Helper()
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	export := fmt.Sprintf("git -C .. archive --format=tar %s | tar -x -C %q", commit, src)
	if out, err := exec.Command("sh", "-c", export).CombinedOutput(); err != nil {
		t.Fatalf("export %s: %v: %s", commit, err, out)
	}
	bin := filepath.Join(dir, "marketd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/marketd")
	build.Dir = src
	start := time.Now()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build at %s: %v: %s", commit, err, out)
	}
	t.Logf("built marketd at %.12s in %.0fs", commit, time.Since(start).Seconds())
	return bin
}

// startBinary runs bin's role with env until the test ends and returns
// its public and ops addresses (from its "listening" log line).
func startBinary(t *testing.T, bin, role string, env map[string]string) (httpAddr, opsAddr string) {
	t.Helper()
	cmd := exec.Command(bin, role)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, "MARKET_LOG_LEVEL=info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	type addrs struct{ http, ops string }
	listening := make(chan addrs, 1)
	var logs lockedBuffer
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(&logs, sc.Text())
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec["msg"] == "listening" {
				h, _ := rec["http"].(string)
				o, _ := rec["ops"].(string)
				listening <- addrs{h, o}
			}
		}
	}()
	select {
	case a := <-listening:
		return a.http, a.ops
	case <-time.After(30 * time.Second):
		t.Fatalf("%s %s did not listen within 30 s: %s", bin, role, logs.String())
	}
	return "", ""
}

// TestPreviousReleaseOnNewSchema: during a rolling upgrade the previous
// release's api keeps serving on the schema the new release migrated:
// ready, with the skew in /readyz, answering reads of rows the new
// release wrote.
func TestPreviousReleaseOnNewSchema(t *testing.T) {
	t.Parallel()
	commit := previousRelease(t)
	bin := buildRelease(t, commit, t.TempDir())

	d := newDeployment(t, nil) // migrated by this build
	id := d.cli("clients", "create", "--org", "Rolling", "--tier", "business")
	key := d.cli("keys", "issue", "--client", id)
	combo := domain.Catalogue(domain.DefaultRegion)[0]
	db, err := store.Open(context.Background(), d.env["MARKET_DATABASE_URL"], store.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.ReplaceTickers(context.Background(), combo, []domain.Ticker{
		{Symbol: "ROLL_USDT", Price: 1.5, ChangePct: 2, Volume: 1000, UpdatedAt: time.Now()},
	}); err != nil {
		t.Fatal(err)
	}

	httpAddr, opsAddr := startBinary(t, bin, "api", d.env)
	var readyz string
	poll(t, 20*time.Second, func() string {
		resp, err := http.Get("http://" + opsAddr + "/readyz")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		readyz = string(b)
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("release %.12s on the new schema: /readyz %d %s", commit, resp.StatusCode, b)
		}
		return ""
	})
	t.Logf("release %.12s on the new schema: /readyz %s", commit, strings.TrimSpace(readyz))

	base := "http://" + httpAddr + "/api/v1/public"
	var usage map[string]any
	if status, problem := getJSON(t, base+"/usage", key, &usage); status != http.StatusOK {
		t.Fatalf("release %.12s: /usage %d %v", commit, status, problem)
	}
	var rows []screenerRow
	url := fmt.Sprintf("%s/screener/%s/%s/%s", base, combo.Market, combo.Exchange, combo.Instrument)
	if status, problem := getJSON(t, url, key, &rows); status != http.StatusOK || len(rows) != 1 || rows[0].Symbol != "ROLL_USDT" {
		t.Fatalf("release %.12s: screener %d %v %+v, want the row this build wrote", commit, status, problem, rows)
	}
}
