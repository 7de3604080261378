package app

import (
	"context"
	"fmt"
	"net/http"
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
