package app_test

import (
	"strings"
	"testing"
)

// TestEveryCommandHasHelp: -h on a command or a sub-command prints its
// usage and flags on stdout and exits 0, without configuration or a
// database; a group without a sub-command is a usage error listing each.
func TestEveryCommandHasHelp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"migrate", "-h"}, []string{"usage: marketd migrate [--wait DURATION] [--lock-timeout 3s] [--lock-retries 10]", "-wait", "-lock-timeout"}},
		{[]string{"api", "--help"}, []string{"usage: marketd api\n", "serve the public API"}},
		{[]string{"clients", "-h"}, []string{"usage: marketd clients <command>", "set-limits"}},
		{[]string{"clients", "create", "-h"}, []string{"usage: marketd clients create --org NAME", "-monthly-quota", "-json"}},
		{[]string{"clients", "show", "ID", "-h"}, []string{"usage: marketd clients show ID", "-json"}},
		{[]string{"clients", "set-tier", "-h"}, []string{"-tier", "-markets"}},
		{[]string{"keys", "issue", "-h"}, []string{"usage: marketd keys issue --client ID [--sandbox]", "-sandbox"}},
		{[]string{"webhooks", "list", "-h"}, []string{"-client"}},
		{[]string{"backfill", "-h"}, []string{"-timeframe", "-days"}},
		{[]string{"probe", "-h"}, []string{"usage: marketd probe URL"}},
	} {
		out, errs, code := run(t, nil, tc.args...)
		if code != 0 || errs != "" {
			t.Errorf("marketd %v: exit %d, stderr %q", tc.args, code, errs)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("marketd %v printed %q, want %q in it", tc.args, out, w)
			}
		}
	}
	for args, want := range map[string]string{
		"keys":               "usage: marketd keys issue --client ID [--sandbox] | revoke KEY_ID | list --client ID",
		"webhooks":           "usage: marketd webhooks list [--client ID] | enable ID",
		"clients frobnicate": `unknown clients command "frobnicate" (create, list, show, suspend, activate, set-tier, set-limits)`,
		"clients show":       "usage: marketd clients show ID",
		"clients set-tier":   "usage: marketd clients set-tier ID",
		"clients show a b":   "usage: marketd clients show ID",
		"keys revoke":        "usage: marketd keys revoke KEY_ID",
		"clients list --org": "flag provided but not defined: -org",
	} {
		_, errs, code := run(t, nil, strings.Fields(args)...)
		if code != 2 || !strings.Contains(errs, want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("marketd %s: exit %d, stderr %q; want 2 and one line with %q", args, code, errs, want)
		}
	}
}
