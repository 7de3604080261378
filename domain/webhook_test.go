package domain_test

import (
	"bytes"
	"encoding/base64"
	"net/netip"
	"testing"

	"github.com/marketscreener/market/domain"
)

func TestValidateCallbackURL(t *testing.T) {
	t.Parallel()
	for raw, ok := range map[string]bool{
		"https://hooks.example.com/market":         true,
		"https://hooks.example.com:8443/a?b=c":     true,
		"https://hooks.example.com:443/a":          true,
		"https://hooks.example.com:1024/a":         true,
		"https://hooks.example.com:65535/a":        true,
		"https://hooks.example.com:22/a":           false,
		"https://hooks.example.com:25/a":           false,
		"https://hooks.example.com:80/a":           false,
		"https://hooks.example.com:1023/a":         false,
		"https://hooks.example.com:0/a":            false,
		"https://hooks.example.com:65536/a":        false,
		"https://93.184.216.34/hook":               true,
		"http://hooks.example.com/market":          false,
		"ftp://hooks.example.com/":                 false,
		"hooks.example.com/market":                 false,
		"https://user:pw@hooks.example.com/":       false,
		"https://localhost/hook":                   false,
		"https://api.localhost/hook":               false,
		"https://printer.local/hook":               false,
		"https://metadata.google.internal/":        false,
		"https://intranet/hook":                    false,
		"https://127.0.0.1/hook":                   false,
		"https://10.1.2.3/hook":                    false,
		"https://169.254.169.254/latest/meta-data": false,
		"https://100.64.0.1/":                      false,
		"https://[::1]/hook":                       false,
		"https://[::ffff:127.0.0.1]/hook":          false,
		"https://[64:ff9b::a00:1]/hook":            false,
		"https://[2002:c0a8:0101::1]/hook":         false,
		"https://[fd00::1]/hook":                   false,
		"https://0.0.0.0/hook":                     false,
		"https:///nohost":                          false,
	} {
		_, err := domain.ValidateCallbackURL(raw, false)
		if (err == nil) != ok {
			t.Errorf("ValidateCallbackURL(%q) = %v, want ok=%v", raw, err, ok)
		}
		if err != nil && domain.ErrorCode(err) != domain.EINVALID {
			t.Errorf("ValidateCallbackURL(%q): code %s, want EINVALID", raw, domain.ErrorCode(err))
		}
	}
	if _, err := domain.ValidateCallbackURL("https://127.0.0.1:9443/hook", true); err != nil {
		t.Errorf("allowPrivate (tests) refused loopback: %v", err)
	}
	if _, err := domain.ValidateCallbackURL("http://127.0.0.1/hook", true); err == nil {
		t.Error("allowPrivate accepted http://")
	}
}

func TestForbiddenIP(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"8.8.8.8": false, "93.184.216.34": false, "2606:4700::1111": false,
		"127.0.0.1": true, "10.0.0.1": true, "172.16.5.4": true, "192.168.1.1": true, "169.254.169.254": true,
		"100.64.1.1": true, "224.0.0.1": true, "0.0.0.0": true, "255.255.255.255": true, "::1": true, "::": true,
		"fe80::1": true, "fd12::1": true, "ff02::1": true, "::ffff:10.0.0.1": true, "::ffff:8.8.8.8": false,
		"64:ff9b::7f00:1": true, "64:ff9b::808:808": false, "2002:7f00:1::": true, "2002:808:808::": false,
		// Teredo, benchmarking, local-use NAT64 (even with a public IPv4
		// inside), documentation 3fff::/20, SRv6 5f00::/16.
		"2001:0:4136:e378:8000:63bf:3fff:fdd2": true, "2001::1": true, "2001:2::1": true, "64:ff9b:1::808:808": true,
		"64:ff9b:1:ffff::a00:1": true, "3fff::1": true, "3fff:fff::1": true, "5f00::1": true, "5f00:ffff::1": true,
		"2001:4860:4860::8888": false, "3ffe::1": false, "4000::1": false,
	} {
		if got := domain.ForbiddenIP(netip.MustParseAddr(s)); got != want {
			t.Errorf("ForbiddenIP(%s) = %v, want %v", s, got, want)
		}
	}
}

func TestSignWebhook(t *testing.T) {
	t.Parallel()
	// RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
	got := domain.SignWebhook("Jefe", []byte("what do ya want for nothing?"))
	if want := "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"; got != want {
		t.Fatalf("SignWebhook = %s, want %s", got, want)
	}
}

func TestSecretBox(t *testing.T) {
	t.Parallel()
	box, err := domain.NewSecretBox(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	secret, err := domain.NewWebhookSecret()
	if err != nil || len(secret) != 6+44 {
		t.Fatalf("secret %q, %v", secret, err)
	}
	sealed, err := box.Seal([]byte(secret), []byte("hook-1"))
	if err != nil || bytes.Contains(sealed, []byte(secret)) {
		t.Fatalf("Seal: %v (ciphertext contains the secret: %v)", err, bytes.Contains(sealed, []byte(secret)))
	}
	if got, err := box.Open(sealed, []byte("hook-1")); err != nil || string(got) != secret {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := box.Open(sealed, []byte("hook-2")); err == nil {
		t.Error("a ciphertext opened under another row's id")
	}
	if _, err := domain.NewSecretBox([]byte("short")); err == nil {
		t.Error("a short key was accepted")
	}
}

// Secrets are in the Standard Webhooks form (whsec_ + padded base64 of 32
// bytes); the key of webhook-signature is what the base64 encodes. Secrets
// issued before (base64url, unpadded) still give their key.
func TestStandardWebhookKey(t *testing.T) {
	t.Parallel()
	secret, _ := domain.NewWebhookSecret()
	key, err := domain.StandardWebhookKey(secret)
	if err != nil || len(key) != 32 {
		t.Fatalf("key of %q: %d bytes, %v", secret, len(key), err)
	}
	legacy := "whsec_" + base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xff}, 16))
	if key, err := domain.StandardWebhookKey(legacy); err != nil || !bytes.Equal(key, bytes.Repeat([]byte{0xfb, 0xff}, 16)) {
		t.Errorf("legacy secret: %x, %v", key, err)
	}
	for _, bad := range []string{"", "whsec_", "whsec_c2hvcnQ=", "sk_" + secret[6:], "whsec_!!!!"} {
		if _, err := domain.StandardWebhookKey(bad); err == nil {
			t.Errorf("StandardWebhookKey(%q) accepted", bad)
		}
	}
	// The Standard Webhooks specification's own example.
	key, _ = base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	got := domain.SignStandardWebhook(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("SignStandardWebhook = %s, want %s", got, want)
	}
}
