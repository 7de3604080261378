package migrations_test

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/marketscreener/market/migrations"
)

var update = flag.Bool("update", false, "add the migrations missing from checksums.txt (a listed one is never changed)")

// checksum is one line of checksums.txt (sha256sum's format: "<hex>  <file>").
type checksum struct{ sum, name string }

func (c checksum) String() string { return c.name }

func readChecksums(t *testing.T) []checksum {
	t.Helper()
	b, err := os.ReadFile("checksums.txt")
	if err != nil {
		t.Fatal(err)
	}
	var list []checksum
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 || strings.TrimSpace(name) != name || name == "" {
			t.Fatalf("checksums.txt:%d: %q is not \"<sha256 hex>  <file>\"", n, sc.Text())
		}
		list = append(list, checksum{sum, name})
	}
	return list
}

// TestChecksums: a landed migration is never edited, renamed or deleted
// (a database migrated with its first content keeps it; add a migration
// instead), and every migration is listed in checksums.txt.
func TestChecksums(t *testing.T) {
	files, err := migrations.Files()
	if err != nil {
		t.Fatal(err)
	}
	listed := readChecksums(t)
	byName := map[string]string{}
	for _, c := range listed {
		if _, dup := byName[c.name]; dup {
			t.Errorf("checksums.txt lists %s twice", c.name)
		}
		byName[c.name] = c.sum
	}
	inFS := map[string]bool{}
	var missing []checksum
	for _, f := range files {
		inFS[f.Name] = true
		sum, ok := byName[f.Name]
		switch {
		case !ok:
			missing = append(missing, checksum{f.SHA256, f.Name})
		case sum != f.SHA256:
			t.Errorf("%s changed after it landed (sha256 %s, checksums.txt %s): a landed migration is never edited; "+
				"restore it and put the change in a new migration. (Not landed on main yet? Delete its line in "+
				"migrations/checksums.txt and run go test ./migrations -run TestChecksums -update.)", f.Name, f.SHA256, sum)
		}
	}
	for _, c := range listed {
		if !inFS[c.name] {
			t.Errorf("%s is listed in checksums.txt but is gone: a landed migration is never renamed or deleted", c.name)
		}
	}
	if len(missing) == 0 {
		return
	}
	if !*update {
		t.Fatalf("migrations not in migrations/checksums.txt: %v\nOnce a migration is final, add it with "+
			"`go test ./migrations -run TestChecksums -update` (or `cd migrations && sha256sum FILE >> checksums.txt`); "+
			"from then on it is immutable", missing)
	}
	all := append(listed, missing...)
	slices.SortFunc(all, func(a, b checksum) int { return strings.Compare(a.name, b.name) })
	var out strings.Builder
	for _, c := range all {
		fmt.Fprintf(&out, "%s  %s\n", c.sum, c.name)
	}
	if err := os.WriteFile("checksums.txt", []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("added to checksums.txt: %v", missing)
}
