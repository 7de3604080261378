package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/marketscreener/market/alerting"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
	"github.com/marketscreener/market/worker"
)

// Over a long synthetic run (every 4 h close of the crypto universe for
// five days), the alerts `verdict == "growth"` and `verdict == "decline"`
// fire exactly with the verdict events to growth and to decline: every
// such verdict event has its alert (same asset, same instant) and no
// alert lacks its event; and each subscription of the alerts' client gets
// both in its queue, in id order.
func TestAlertsMatchVerdictEventsOverASyntheticRun(t *testing.T) {
	t.Parallel()
	clk := &clock{t: time.Date(2026, 11, 22, 0, 0, 30, 0, time.UTC)}
	in, db := newIngester(t, clk)
	ctx := context.Background()
	c := &domain.Client{OrgName: "Alerts", Tier: domain.Business, Markets: domain.Markets}
	if err := db.CreateClient(ctx, c); err != nil {
		t.Fatal(err)
	}
	box, err := domain.NewSecretBox(bytes.Repeat([]byte{3}, 32))
	if err != nil {
		t.Fatal(err)
	}
	crypto := domain.Crypto
	hook, _, err := db.CreateWebhook(ctx, box, c.ID, "https://hooks.example/alerts", &crypto)
	if err != nil {
		t.Fatal(err)
	}
	want := map[analytics.Verdict]string{}
	for _, v := range []analytics.Verdict{analytics.VerdictGrowth, analytics.VerdictDecline} {
		a, err := db.CreateAlert(ctx, domain.Alert{ClientID: c.ID, Name: string(v), Market: domain.Crypto,
			Expression: fmt.Sprintf("verdict == %q", v)}, c.Tier)
		if err != nil {
			t.Fatal(err)
		}
		want[v] = a.ID
	}
	sc := &worker.Scorer{Store: db, Region: "global", Logger: discard(), Now: clk.now, Alerts: &alerting.Matcher{}}
	for range 30 {
		for _, err := range []error{
			in.HandleIngestTickers(ctx, worker.NewIngestTickersTask(spot, clk.t)),
			in.HandleIngestCandles(ctx, worker.NewIngestCandlesTask(spot, domain.TF4h, clk.t)),
			sc.HandleScore(ctx, worker.NewScoreTask(domain.Crypto, analytics.Swing, clk.t)),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		clk.t = clk.t.Add(4 * time.Hour)
	}
	verdicts, err := db.VerdictEvents(ctx, 0, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := db.AlertEvents(ctx, 0, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	key := func(alertID, symbol string, at time.Time) string {
		return alertID + "|" + symbol + "|" + at.UTC().Format(time.RFC3339Nano)
	}
	expected := map[string]bool{}
	for _, v := range verdicts {
		if id, ok := want[v.NewVerdict]; ok {
			expected[key(id, v.Symbol, v.At)] = true
		}
	}
	if len(expected) < 10 {
		t.Fatalf("only %d verdict events to growth or decline over the run: too short to tell", len(expected))
	}
	got := map[string]bool{}
	for _, a := range alerts {
		k := key(a.AlertID, a.Symbol, a.At)
		if got[k] {
			t.Errorf("alert fired twice: %s", k)
		}
		got[k] = true
		if !expected[k] {
			t.Errorf("alert without its verdict event: %s (read %v)", k, a.Read)
		}
	}
	for k := range expected {
		if !got[k] {
			t.Errorf("verdict event without its alert: %s", k)
		}
	}
	t.Logf("%d verdict events to growth or decline, %d alert events", len(expected), len(alerts))

	// Both kinds go into the subscription's one queue.
	for {
		n, err := db.FanOut(ctx, 500)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	log, err := db.WebhookDeliveries(ctx, c.ID, hook.ID, 100_000)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, d := range log {
		kinds[d.Event]++
	}
	if kinds[domain.EventAlertTriggered] == 0 || kinds[domain.EventVerdictChanged] == 0 {
		t.Fatalf("the subscription's deliveries by kind = %v; want both kinds", kinds)
	}
}
