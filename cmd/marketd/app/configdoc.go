package app

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/marketscreener/market/feeds"
)

// The README's configuration tables sit between these markers; everything
// between them is rendered from the option table (configMarkdown).
const (
	configDocBegin = "<!-- config:begin -->"
	configDocEnd   = "<!-- config:end -->"
)

// configMarkdown renders the configuration tables: every variable with its
// default and meaning, then the hosts MARKET_FEED_URLS overrides.
func configMarkdown() string {
	var b strings.Builder
	b.WriteString("<!-- rendered from cmd/marketd/app/config.go by: go test ./cmd/marketd/app -run TestREADMEConfigTable -update -->\n\n")
	b.WriteString("| Variable | Default | Meaning |\n|---|---|---|\n")
	for _, o := range configOptions() {
		def := o.shownDef
		if def == "" {
			def = "—"
			if o.def != "" {
				def = "`" + o.def + "`"
			}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", o.name, cell(def), cell(o.doc))
	}
	b.WriteString("\nHosts of `MARKET_FEED_URLS` (REST names take `https://` or `http://`, websocket `-stream` names `wss://` or `ws://`,\n" +
		"`oanda-stream`, a streaming HTTP response, `https://` or `http://`; a path is kept, so a mirror may serve under a prefix):\n\n")
	b.WriteString("| Name | Default | Used for |\n|---|---|---|\n")
	for _, h := range feeds.HostDocs() {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", h.Name, h.Default, cell(h.Doc))
	}
	return b.String()
}

// cell keeps a table cell in its column.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// replaceConfigDoc returns readme with the text between the markers
// replaced by doc.
func replaceConfigDoc(readme []byte, doc string) ([]byte, error) {
	begin := bytes.Index(readme, []byte(configDocBegin))
	end := bytes.Index(readme, []byte(configDocEnd))
	if begin < 0 || end < begin {
		return nil, errors.New("README.md: no " + configDocBegin + " … " + configDocEnd + " block")
	}
	var out bytes.Buffer
	out.Write(readme[:begin+len(configDocBegin)])
	out.WriteString("\n\n" + doc + "\n")
	out.Write(readme[end:])
	return out.Bytes(), nil
}
