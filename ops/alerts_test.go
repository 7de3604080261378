package ops

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestAlertRules: the rules parse, every alert the operators need is
// there with a severity, a summary and a runbook entry in the README, and
// every expression names only families marketd exports (documented in
// the README). promtool checks them too when installed.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	families := DocumentedFamilies(readme)
	if len(families) < 30 {
		t.Fatalf("found %d documented families in the README's metrics table", len(families))
	}
	metricRe := regexp.MustCompile(`\b(?:marketd|asynq)_[a-z0-9_]+\b`)
	var alerts []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if r.Alert == "" || strings.TrimSpace(r.Expr) == "" || r.For == "" {
				t.Errorf("rule %+v: alert, expr and for are required", r)
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("%s: severity label and summary annotation are required", r.Alert)
			}
			anchor := "runbook-" + strings.ToLower(r.Alert)
			if r.Annotations["runbook"] != "README.md#"+anchor {
				t.Errorf("%s: runbook annotation %q, want README.md#%s", r.Alert, r.Annotations["runbook"], anchor)
			}
			if !bytes.Contains(readme, []byte("#### Runbook: "+r.Alert+"\n")) {
				t.Errorf("%s: no README heading \"#### Runbook: %s\"", r.Alert, r.Alert)
			}
			if !bytes.Contains(readme, []byte("| `"+r.Alert+"` |")) {
				t.Errorf("%s: not in the README's alerts table", r.Alert)
			}
			for _, name := range metricRe.FindAllString(r.Expr, -1) {
				base := name
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(families, b) {
						base = b
					}
				}
				if !slices.Contains(families, base) {
					t.Errorf("%s: expression uses %s, which marketd does not export (not in the README's metrics table)", r.Alert, name)
				}
			}
		}
	}
	for _, want := range []string{"MarketdFeedStale", "MarketdQueueLatencyHigh", "MarketdWebhookFailureRatioHigh",
		"MarketdScoringStalled", "MarketdDatabaseUnreachable", "MarketdRedisUnreachable", "MarketdQuotaLedgerLagging"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("alert %s is missing", want)
		}
	}
	if path, err := exec.LookPath("promtool"); err == nil {
		out, err := exec.Command(path, "check", "rules", "alerts.yml").CombinedOutput()
		if err != nil {
			t.Fatalf("promtool check rules: %v\n%s", err, out)
		}
		t.Logf("promtool: %s", strings.TrimSpace(string(out)))
		// The rules' unit tests: a closed market's feeds raise no
		// MarketdFeedStale.
		out, err = exec.Command(path, "test", "rules", "testdata/feedstale_test.yml").CombinedOutput()
		if err != nil {
			t.Fatalf("promtool test rules: %v\n%s", err, out)
		}
	} else {
		t.Log("promtool not installed (Debian: apt-get install prometheus): checked the structure and names only")
	}
}
