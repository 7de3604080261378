// Package migrations embeds the numbered SQL migrations of the Postgres
// schema (goose format: "-- +goose Up" / "-- +goose Down"). store applies them.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
