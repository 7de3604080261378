package webhook_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/webhook"
)

func TestSandboxVerdictBodyIsTheVerdictBodyMarked(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)
	var live, sandbox map[string]any
	_ = json.Unmarshal(webhook.VerdictBody(7, domain.Crypto, "BTC_USDT", "neutral", "growth", 35, at, "v1"), &live)
	_ = json.Unmarshal(webhook.SandboxVerdictBody(7, domain.Crypto, "BTC_USDT", "neutral", "growth", 35, at, "v1"), &sandbox)
	if _, ok := live["sandbox"]; ok {
		t.Fatalf("a live body carries sandbox: %v", live)
	}
	if sandbox["sandbox"] != true {
		t.Fatalf("sandbox body %v, want sandbox: true", sandbox)
	}
	delete(sandbox, "sandbox")
	if got, want := mustMarshal(sandbox), mustMarshal(live); got != want {
		t.Fatalf("sandbox body %s, want the live body %s plus sandbox", got, want)
	}
}

func mustMarshal(v any) string { b, _ := json.Marshal(v); return string(b) }
