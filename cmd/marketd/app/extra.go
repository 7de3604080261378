package app

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/marketscreener/market/domain"
)

// cmdDemoKey makes sure the demo client exists (an enterprise client with
// every market, found by its organisation name) and prints a key for it
// when it creates the client, or when --new-key asks for one: the one-step
// start of make run and the compose demo. Running it again (every compose
// `up`) creates no second client and shows no key twice.
func (m *Main) cmdDemoKey(ctx context.Context, fs *flag.FlagSet, args []string) error {
	org := fs.String("org", "Demo", "organisation name of the demo client")
	newKey := fs.Bool("new-key", false, "issue and print another key when the demo client exists")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	db, _, err := m.openStore(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	clients, err := db.Clients(ctx)
	if err != nil {
		return err
	}
	var c *domain.Client
	for _, x := range clients {
		if x.OrgName == *org {
			c = x
			break
		}
	}
	created := c == nil
	if created {
		c = &domain.Client{OrgName: *org, Tier: domain.Enterprise, Markets: append([]domain.Market(nil), domain.Markets...)}
		if err := db.CreateClient(ctx, c); err != nil {
			return err
		}
	}
	out := map[string]any{"client_id": c.ID, "created": created}
	if created || *newKey {
		key, _, err := db.IssueKey(ctx, c.ID)
		if err != nil {
			return err
		}
		out["key"] = key
		if !*asJSON {
			fmt.Fprintf(m.Stderr, "demo client %s (%s, %s, %s); its key:\n", c.ID, c.OrgName, c.Tier, c.Status)
			fmt.Fprintln(m.Stdout, key)
		}
	} else if !*asJSON {
		fmt.Fprintf(m.Stderr, "demo client %s (%s) exists; its key was shown once, when it was created.\n"+
			"Another key: marketd keys issue --client %s (or marketd demo-key --org %q --new-key)\n", c.ID, c.OrgName, c.ID, c.OrgName)
	}
	if *asJSON {
		return m.printJSON(out)
	}
	return nil
}

// cmdProbe GETs a URL and succeeds on 2xx: the container health check of
// an image that has no shell or curl.
func (m *Main) cmdProbe(ctx context.Context, fs *flag.FlagSet, args []string) error {
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
func (m *Main) cmdFeedHealth(ctx context.Context, fs *flag.FlagSet, args []string) error {
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
