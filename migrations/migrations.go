// Package migrations embeds the numbered SQL migrations of the Postgres
// schema (goose format: "-- +goose Up" / "-- +goose Down"). store applies them.
//
// A migration that has landed is never edited: checksums.txt holds the
// SHA-256 of every landed file (sha256sum's format) and a test compares
// them; store records each applied migration's checksum in the database
// and refuses a database migrated with other files than the binary's.
package migrations

import (
	"cmp"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS

// File is one embedded migration.
type File struct {
	Version int64
	Name    string // "00015_migration_checksums.sql"
	SHA256  string // lower-case hex of the file's bytes
}

// Files lists the embedded migrations in version order. They are read and
// hashed once: the list is constant for the life of the binary.
var Files = sync.OnceValues(func() ([]File, error) { return list(FS) })

func list(fsys fs.FS) ([]File, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	files := make([]File, 0, len(names))
	for _, name := range names {
		version, err := Version(name)
		if err != nil {
			return nil, err
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		files = append(files, File{Version: version, Name: name, SHA256: hex.EncodeToString(sum[:])})
	}
	slices.SortFunc(files, func(a, b File) int { return cmp.Compare(a.Version, b.Version) })
	return files, nil
}

// Version is the number a migration's file name starts with (goose's rule:
// the digits before the first underscore).
func Version(name string) (int64, error) {
	digits, _, ok := strings.Cut(name, "_")
	v, err := strconv.ParseInt(digits, 10, 64)
	if !ok || err != nil || v < 1 {
		return 0, fmt.Errorf("migrations: %s: the name must start with a positive version and an underscore", name)
	}
	return v, nil
}
