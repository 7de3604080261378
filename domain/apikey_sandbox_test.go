package domain_test

import (
	"strings"
	"testing"

	"github.com/marketscreener/market/domain"
)

func TestSandboxKeysKeepTheChecksumScheme(t *testing.T) {
	t.Parallel()
	key, err := domain.NewSandboxKey()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(key, "msk_test_") || len(key) != domain.SandboxKeyLen || !domain.CheckKeyFormat(key) {
		t.Fatalf("sandbox key %q (%d chars) does not check", key, len(key))
	}
	// One character changed, or the prefix of the other kind: refused.
	b := []byte(key)
	if b[20] == 'a' {
		b[20] = 'b'
	} else {
		b[20] = 'a'
	}
	if domain.CheckKeyFormat(string(b)) {
		t.Fatal("a changed sandbox key passed its checksum")
	}
	if domain.CheckKeyFormat("msk_" + key[len("msk_test_"):]) {
		t.Fatal("a sandbox key's body passed as a live key")
	}
	live, _ := domain.NewKey()
	if !domain.CheckKeyFormat(live) || strings.HasPrefix(live, "msk_test_") {
		t.Fatalf("live key %q", live)
	}
	if p := domain.KeyDisplayPrefix(key); p != key[:15] {
		t.Fatalf("display prefix %q", p)
	}
	k := &domain.APIKey{Prefix: domain.KeyDisplayPrefix(key)}
	if !k.Sandbox() || (&domain.APIKey{Prefix: domain.KeyDisplayPrefix(live)}).Sandbox() {
		t.Fatal("Sandbox() does not follow the stored prefix")
	}
}
