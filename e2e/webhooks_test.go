package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	apiclient "github.com/marketscreener/market/client"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
)

// TestWebhookDeliveredByDeployment: a client subscribes over the API; a
// verdict change written to the outbox reaches its https endpoint through
// the scheduler, the worker and the dispatcher of marketd all, signed with
// the secret the API showed once.
func TestWebhookDeliveredByDeployment(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		bodies [][]byte
		heads  []http.Header
	)
	rcv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies, heads = append(bodies, b), append(heads, r.Header.Clone())
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rcv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rcv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	d := newDeployment(t, map[string]string{
		"MARKET_FEEDS":                 "synthetic",
		"MARKET_SECRET_KEY":            strings.Repeat("ab", 32),
		"MARKET_WEBHOOK_INTERVAL":      "1s",
		"MARKET_WEBHOOK_ALLOW_PRIVATE": "true",
		"MARKET_WEBHOOK_CA_FILE":       ca,
	})
	key := d.cli("demo-key")
	base, _ := d.start("all")

	public := newAPIClient(t, base, key)
	crypto := apiclient.CreateWebhookInputBodyMarketCrypto
	created, err := public.CreateWebhookWithResponse(t.Context(), apiclient.CreateWebhookJSONRequestBody{CallbackUrl: rcv.URL + "/market", Market: &crypto})
	if err != nil {
		t.Fatal(err)
	}
	sub := created.JSON201
	if sub == nil || sub.Secret == "" {
		t.Fatalf("subscribe: %d %s", created.StatusCode(), created.Body)
	}

	// The scorer writes verdict changes to the outbox; write one directly
	// so the test does not wait for the synthetic market to cross ±20.
	db, err := store.Open(context.Background(), d.env["MARKET_DATABASE_URL"], store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var eventID int64
	// Its model_version is one no scorer writes, so the payload shows the event's own.
	if err := db.Pool.QueryRow(context.Background(), `INSERT INTO verdict_events (market, symbol, old_verdict, new_verdict, overall_score, at, model_version)
		VALUES ('crypto', 'BTC_USDT', 'neutral', 'decline', -27, now(), 'v9') RETURNING id`).Scan(&eventID); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	poll(t, 20*time.Second, func() string {
		mu.Lock()
		defer mu.Unlock()
		for i, b := range bodies {
			if heads[i].Get("X-Webhook-Id") == strconv.FormatInt(eventID, 10) {
				if got := heads[i].Get("X-Webhook-Signature"); got != domain.SignWebhook(sub.Secret, b) {
					t.Fatalf("signature %q does not verify with the secret shown at creation", got)
				}
				wh, err := standardwebhooks.NewWebhook(sub.Secret)
				if err != nil {
					t.Fatalf("the Standard Webhooks library refuses the secret: %v", err)
				}
				if err := wh.Verify(b, heads[i]); err != nil {
					t.Fatalf("Standard Webhooks verification: %v", err)
				}
				// The payload decodes into the type the document's webhooks give it.
				var ev apiclient.VerdictChanged
				dec := json.NewDecoder(bytes.NewReader(b))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&ev); err != nil {
					t.Fatalf("payload %s: %v", b, err)
				}
				if ev.Id != strconv.FormatInt(eventID, 10) || ev.Event != "verdict_changed" || ev.Market != "crypto" || ev.Symbol != "BTC_USDT" ||
					ev.OldVerdict != "neutral" || ev.NewVerdict != "decline" || ev.OverallScore != -27 || ev.ModelVersion != "v9" {
					t.Fatalf("payload %s", b)
				}
				return ""
			}
		}
		return "event not delivered yet"
	})
	t.Logf("delivered %.1fs after the verdict change", time.Since(start).Seconds())

	poll(t, 5*time.Second, func() string {
		subs, err := public.ListWebhooksWithResponse(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if subs.JSON200 == nil || len(*subs.JSON200) != 1 || (*subs.JSON200)[0].Id != sub.Id || (*subs.JSON200)[0].LastSuccessAt == nil {
			return fmt.Sprintf("GET /webhooks: %d %s", subs.StatusCode(), subs.Body)
		}
		return ""
	})
	// The delivery log shows it delivered on the first attempt.
	limit := int64(5)
	deliveries, err := public.ListWebhookDeliveriesWithResponse(t.Context(), sub.Id, &apiclient.ListWebhookDeliveriesParams{Limit: &limit})
	if err != nil {
		t.Fatal(err)
	}
	if log := deliveries.JSON200; log == nil || len(*log) != 1 || (*log)[0].EventId != strconv.FormatInt(eventID, 10) ||
		(*log)[0].State != "delivered" || (*log)[0].Attempt != 1 || (*log)[0].ResponseStatus == nil {
		t.Errorf("delivery log: %d %s", deliveries.StatusCode(), deliveries.Body)
	}

	// Cancelled, the subscription is gone from the list, and a second
	// cancel finds nothing.
	for _, want := range []int{http.StatusNoContent, http.StatusNotFound} {
		del, err := public.DeleteWebhookWithResponse(t.Context(), sub.Id)
		if err != nil {
			t.Fatal(err)
		}
		if del.StatusCode() != want {
			t.Fatalf("DELETE /webhooks/%s: %d %s, want %d", sub.Id, del.StatusCode(), del.Body, want)
		}
	}
	subs, err := public.ListWebhooksWithResponse(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if subs.JSON200 == nil || len(*subs.JSON200) != 0 {
		t.Errorf("GET /webhooks after the cancel: %d %s", subs.StatusCode(), subs.Body)
	}
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}
