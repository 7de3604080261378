package store

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// SameTarget tells whether two Postgres URLs lead to the same schema: a
// host of one (any of its hosts, fallbacks included) is one of the
// other's, on the same port, the same database, and the same first schema
// of the search_path (where tables are created and found). Two spellings
// of one target are the same ("postgres://a:5432/db" and
// "postgres://user@a/db?sslmode=disable"); loopback names and Unix
// sockets count as one host; the same database with another schema is
// another target.
func SameTarget(a, b string) (bool, error) {
	ta, err := parseTarget(a)
	if err != nil {
		return false, err
	}
	tb, err := parseTarget(b)
	if err != nil {
		return false, err
	}
	if ta.database != tb.database || ta.schema != tb.schema {
		return false, nil
	}
	for _, h := range ta.hosts {
		if slices.Contains(tb.hosts, h) {
			return true, nil
		}
	}
	return false, nil
}

type pgTarget struct {
	hosts    []string // normalised host:port
	database string
	schema   string
}

func parseTarget(raw string) (pgTarget, error) {
	cfg, err := pgconn.ParseConfig(raw)
	if err != nil {
		return pgTarget{}, fmt.Errorf("store: parse database url: %w", err)
	}
	t := pgTarget{database: cfg.Database, schema: firstSchema(cfg.RuntimeParams["search_path"])}
	if t.database == "" {
		t.database = cfg.User // Postgres's default database
	}
	add := func(host string, port uint16) {
		h := normalHost(host) + ":" + strconv.Itoa(int(port))
		if !slices.Contains(t.hosts, h) {
			t.hosts = append(t.hosts, h)
		}
	}
	add(cfg.Host, cfg.Port)
	for _, f := range cfg.Fallbacks {
		add(f.Host, f.Port)
	}
	return t, nil
}

// normalHost folds the names of this machine's server into one.
func normalHost(h string) string {
	h = strings.ToLower(strings.Trim(h, "[]"))
	if h == "" || h == "localhost" || strings.HasPrefix(h, "/") {
		return "localhost"
	}
	if ip := net.ParseIP(h); ip != nil {
		if ip.IsLoopback() {
			return "localhost"
		}
		return ip.String()
	}
	return h
}

// firstSchema is the schema a search_path creates tables in: its first
// entry, unquoted identifiers folded to lower case; "$user" is skipped
// (the user's schema rarely exists) and an unset path is Postgres's
// default, "$user", public.
func firstSchema(path string) string {
	for _, s := range strings.Split(path, ",") {
		s = strings.TrimSpace(s)
		if s == "" || s == `"$user"` || s == "$user" {
			continue
		}
		if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
			return strings.ReplaceAll(s[1:len(s)-1], `""`, `"`)
		}
		return strings.ToLower(s)
	}
	return "public"
}
