package app

import (
	"context"
	"fmt"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/marketscreener/market/domain"
)

// cmdDemoKey creates an enterprise client with every market and prints a
// fresh key: the one-step start of make run and the compose demo.
func (m *Main) cmdDemoKey(ctx context.Context, args []string) error {
	fs := newFlagSet("demo-key")
	org := fs.String("org", "Demo", "organisation name")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	db, _, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	c := &domain.Client{OrgName: *org, Tier: domain.Enterprise, Markets: append([]domain.Market(nil), domain.Markets...)}
	if err := db.CreateClient(ctx, c); err != nil {
		return err
	}
	key, _, err := db.IssueKey(ctx, c.ID)
	if err != nil {
		return err
	}
	if *asJSON {
		return m.printJSON(map[string]string{"client_id": c.ID, "key": key})
	}
	fmt.Fprintf(m.Stderr, "client %s (%s, enterprise, all markets)\n", c.ID, c.OrgName)
	fmt.Fprintln(m.Stdout, key)
	return nil
}

// cmdProbe GETs a URL and succeeds on 2xx: the container health check of
// an image that has no shell or curl.
func (m *Main) cmdProbe(ctx context.Context, args []string) error {
	fs := newFlagSet("probe")
	fs.Bool("json", false, "accepted for uniformity; probe prints nothing")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("usage: marketd probe URL")
	}
	args = pos
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		return usagef("probe: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %s", args[0], resp.Status)
	}
	return nil
}

// cmdFeedHealth shows the last success and last error of every ingested
// combination and kind of data, so an operator sees a failing feed.
func (m *Main) cmdFeedHealth(ctx context.Context, args []string) error {
	fs := newFlagSet("feed-health")
	asJSON := fs.Bool("json", false, "print JSON")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("feed-health takes no arguments")
	}
	db, _, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	hs, err := db.FeedHealthAll(ctx)
	if err != nil {
		return err
	}
	type row struct {
		Combination   string     `json:"combination"`
		Kind          string     `json:"kind"`
		Failing       bool       `json:"failing"`
		LastSuccessAt *time.Time `json:"last_success_at"`
		LastErrorAt   *time.Time `json:"last_error_at"`
		LastError     string     `json:"last_error,omitempty"`
	}
	out := make([]row, 0, len(hs))
	for _, h := range hs {
		out = append(out, row{Combination: h.Combination.String(), Kind: h.Kind, Failing: h.Failing(),
			LastSuccessAt: h.LastSuccessAt, LastErrorAt: h.LastErrorAt, LastError: h.LastError})
	}
	if *asJSON {
		return m.printJSON(out)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMBINATION\tKIND\tSTATE\tLAST SUCCESS\tLAST ERROR")
	ts := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	for _, r := range out {
		state := "ok"
		if r.Failing {
			state = "FAILING"
		}
		lastErr := ts(r.LastErrorAt)
		if r.LastError != "" {
			lastErr += " " + r.LastError
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Combination, r.Kind, state, ts(r.LastSuccessAt), lastErr)
	}
	return tw.Flush()
}
