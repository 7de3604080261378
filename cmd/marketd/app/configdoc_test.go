package app

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite README.md's configuration tables from the option table")

// TestREADMEConfigTable: README.md's configuration tables are the ones the
// option table renders, so the documentation lists every variable with its
// real default. -update rewrites them.
func TestREADMEConfigTable(t *testing.T) {
	const path = "../../../README.md"
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := replaceConfigDoc(readme, configMarkdown())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if string(want) != string(readme) {
		t.Fatalf("README.md's configuration tables differ from the option table's; run\n" +
			"  go test ./cmd/marketd/app -run TestREADMEConfigTable -update\nand commit README.md")
	}
}

// TestConfigOptionsAreDocumented: every option has a documentation and a
// name of its own, and every parsed one accepts its own default.
func TestConfigOptionsAreDocumented(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, o := range configOptions() {
		if seen[o.name] {
			t.Errorf("%s is listed twice", o.name)
		}
		seen[o.name] = true
		if strings.TrimSpace(o.doc) == "" || strings.Contains(o.doc, "\n") {
			t.Errorf("%s: documentation %q must be one non-empty line", o.name, o.doc)
		}
		if o.parse == nil && o.def != "" {
			t.Errorf("%s: an option read elsewhere shows its default in shownDef", o.name)
		}
	}
	if _, err := LoadConfig(func(string) string { return "" }); err != nil {
		t.Errorf("the defaults are refused: %v", err)
	}
}
