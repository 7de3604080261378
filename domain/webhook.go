package domain

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Webhook limits (DESIGN §3).
const (
	// MaxWebhooksPerClient is how many subscriptions one client may hold.
	MaxWebhooksPerClient = 10
	// WebhookFailureLimit consecutive failed deliveries disable a subscription.
	WebhookFailureLimit = 10
	// maxCallbackURL bounds the stored URL.
	maxCallbackURL = 2048
	// SecretRotationOverlap is how long the previous secret still signs
	// deliveries (a second webhook-signature) after a rotation.
	SecretRotationOverlap = 24 * time.Hour
)

// Webhook subscription statuses.
const (
	WebhookActive   = "active"
	WebhookDisabled = "disabled"
)

// WebhookStatuses lists every subscription status.
var WebhookStatuses = []string{WebhookActive, WebhookDisabled}

// Webhook is a client's subscription to verdict_changed events.
type Webhook struct {
	ID          string
	ClientID    string
	CallbackURL string
	// Market is nil for every market the client's tier allows at delivery time.
	Market              *Market
	Status              string
	ConsecutiveFailures int
	// LastDeliveryAt is the last attempt, LastSuccessAt the last 2xx.
	LastDeliveryAt *time.Time
	LastSuccessAt  *time.Time
	// LastError is the category of the last failed attempt (zero when none
	// failed yet), LastErrorAt when it happened.
	LastError   DeliveryError
	LastErrorAt *time.Time
	// PreviousSecretUntil is when the secret replaced by the last rotation
	// stops signing deliveries (nil: no rotation within the overlap).
	PreviousSecretUntil *time.Time
	CreatedAt           time.Time
}

// Delivery states.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryDropped   = "dropped"
)

// DeliveryStates lists every delivery state.
var DeliveryStates = []string{DeliveryPending, DeliveryDelivered, DeliveryDropped}

// Why a pending delivery was dropped (WebhookDelivery.DropReason).
const (
	DropSubscriptionDisabled = "subscription_disabled"
	DropMarketNotInTier      = "market_not_in_tier"
	DropClientInactive       = "client_inactive"
)

// DropReasons lists every reason a delivery is dropped.
var DropReasons = []string{DropSubscriptionDisabled, DropMarketNotInTier, DropClientInactive}

// WebhookDelivery is one event's delivery to one subscription, as shown in
// its delivery log.
type WebhookDelivery struct {
	ID        int64
	WebhookID string
	EventID   int64
	// Event is the event's kind: EventVerdictChanged or EventAlertTriggered.
	Event  string
	Market Market
	Symbol string
	// Attempts is how many times it was sent (a redelivery goes on counting).
	Attempts  int
	Status    string
	LastError DeliveryError // of the last attempt; zero when it succeeded
	// ResponseStatus is the HTTP status of the last answer (nil without one).
	ResponseStatus *int
	LatencyMS      *int
	LastAttemptAt  *time.Time
	NextAttemptAt  *time.Time // pending only
	DeliveredAt    *time.Time
	DropReason     string
	CreatedAt      time.Time
}

// Delivery error categories: what a client (and the logs) learn about a
// failed attempt. Never an address, a resolver's answer or a host name.
const (
	ErrDNS            = "dns_failure"         // the host name did not resolve
	ErrAddressRefused = "address_not_allowed" // it resolved only to private or internal addresses, or its port is not allowed
	ErrConnect        = "connect_failed"      // no TCP connection (refused, unreachable)
	ErrTLS            = "tls_error"           // handshake or certificate failure
	ErrTimeout        = "timeout"             // no complete answer within the time-out
	ErrHTTPStatus     = "http_status"         // answered with a non-2xx status (Status holds it)
	ErrBadResponse    = "invalid_response"    // connection closed early, malformed answer, headers over 16 KiB
	ErrInternal       = "internal_error"      // on our side (for example a secret that would not decrypt)
	ErrUnknown        = "unknown"             // recorded before categories existed
	// ErrUnreachable is a test ping's one answer for every failure before
	// a TLS server answered: no address, refused, filtered, reset, or a
	// server that does not speak TLS. Telling those apart would tell a
	// closed port from a filtered or an open one: a port scanner.
	ErrUnreachable = "unreachable"
)

// AllowedCallbackPort reports whether a callback URL may use port: 443 (the
// default of https://) or an unprivileged port (1024-65535, where
// receivers behind a proxy or on a developer's machine listen). The
// privileged ports below 1024 are those of other services (SSH, SMTP,
// LDAP, SMB...), which webhooks must not be able to knock on.
func AllowedCallbackPort(port int) bool {
	return port == 443 || (port >= 1024 && port <= 65535)
}

// DeliveryErrorCategories lists every category (documentation, validation).
var DeliveryErrorCategories = []string{ErrDNS, ErrAddressRefused, ErrConnect, ErrTLS, ErrTimeout, ErrHTTPStatus,
	ErrBadResponse, ErrInternal, ErrUnknown}

// PingErrorCategories lists the categories a test ping can answer: the
// failures before a TLS server answered are one, ErrUnreachable.
var PingErrorCategories = []string{ErrUnreachable, ErrAddressRefused, ErrTLS, ErrTimeout, ErrHTTPStatus,
	ErrBadResponse, ErrInternal}

// DeliveryError is the outcome of a failed attempt: a category, and the
// HTTP status for ErrHTTPStatus. The zero value is "no error".
type DeliveryError struct {
	Category string
	Status   int
}

// OK reports whether this is the zero value (a success).
func (e DeliveryError) OK() bool { return e.Category == "" }

// String is a short text for clients and logs: the category, and the
// status for http_status ("http_status 503").
func (e DeliveryError) String() string {
	if e.Category == ErrHTTPStatus {
		return fmt.Sprintf("%s %d", e.Category, e.Status)
	}
	return e.Category
}

// ValidateCallbackURL checks a webhook callback URL as given by a client:
// https only, a host name or a public IP address, port 443 or 1024-65535
// (AllowedCallbackPort), no credentials, at most 2048 characters. Host names are checked again when a delivery dials them
// (ForbiddenIP on every resolved address), because DNS can change;
// allowPrivate (tests only) lifts the address rules.
func ValidateCallbackURL(raw string, allowPrivate bool) (*url.URL, error) {
	const loc = "body.callback_url"
	bad := func(format string, args ...any) (*url.URL, error) {
		return nil, Invalid(loc, raw, format, args...)
	}
	if len(raw) > maxCallbackURL {
		return bad("must be at most %d characters", maxCallbackURL)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		return bad("must be an absolute https:// URL")
	}
	if u.Scheme != "https" {
		return bad("must start with https://")
	}
	if u.User != nil {
		return bad("must not carry credentials")
	}
	host := u.Hostname()
	if host == "" {
		return bad("must name a host")
	}
	if u.Fragment != "" {
		return bad("must not have a fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || !AllowedCallbackPort(n) {
			return bad("must use port 443 (the default) or a port from 1024 to 65535")
		}
	}
	if allowPrivate {
		return u, nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ForbiddenIP(ip) {
			return bad("must not point to a private, loopback, link-local or otherwise internal address")
		}
		return u, nil
	}
	lower := strings.ToLower(strings.TrimSuffix(host, "."))
	if lower == "localhost" || strings.HasSuffix(lower, ".localhost") || strings.HasSuffix(lower, ".local") ||
		strings.HasSuffix(lower, ".internal") || !strings.Contains(lower, ".") {
		return bad("must name a public host")
	}
	return u, nil
}

// forbiddenPrefixes are the address ranges a delivery must never reach:
// this host, private networks, link-local (cloud metadata lives there),
// carrier-grade NAT, multicast, reserved and documentation ranges.
var forbiddenPrefixes = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
		"203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4", "255.255.255.255/32",
		"::/128", "::1/128", "100::/64", "2001:db8::/32", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
		// Teredo tunnels (the server's IPv4 and the client's obfuscated
		// one are embedded), benchmarking, local-use NAT64 (RFC 8215: the
		// site's own translator, whose IPv4 side may be private),
		// documentation (RFC 9637) and SRv6 segment identifiers (RFC 9602).
		"2001::/32", "2001:2::/48", "64:ff9b:1::/48", "3fff::/20", "5f00::/16",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// IPv6 forms that embed an IPv4 address, judged by that address.
var (
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
	ipv4Compatible = netip.MustParsePrefix("::/96")
)

// ForbiddenIP reports whether a delivery must not connect to ip. IPv6
// forms that embed an IPv4 address (IPv4-mapped ::ffff:a.b.c.d, NAT64
// 64:ff9b::/96, 6to4 2002::/16, IPv4-compatible ::a.b.c.d) are judged by
// the embedded address, so they cannot smuggle a private one.
func ForbiddenIP(ip netip.Addr) bool {
	if !ip.IsValid() {
		return true
	}
	ip = ip.WithZone("")
	if ip.Is4In6() {
		return ForbiddenIP(ip.Unmap())
	}
	if ip.Is6() {
		b := ip.As16()
		switch {
		case nat64.Contains(ip):
			return ForbiddenIP(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		case sixToFour.Contains(ip):
			return ForbiddenIP(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
		case ipv4Compatible.Contains(ip):
			return ForbiddenIP(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		}
	}
	for _, p := range forbiddenPrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// SignWebhook is the X-Webhook-Signature of a delivery: the lower-case hex
// HMAC-SHA256 of the exact body bytes, keyed with the secret string as
// shown to the client (all of it, "whsec_" included).
func SignWebhook(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// webhookSecretPrefix marks a signing secret (the Standard Webhooks form).
const webhookSecretPrefix = "whsec_"

// NewWebhookSecret returns a fresh signing secret in the Standard Webhooks
// form: "whsec_" and 32 random bytes in standard, padded base64 (the form
// the Standard Webhooks libraries decode).
func NewWebhookSecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("domain: webhook secret: %w", err)
	}
	return webhookSecretPrefix + base64.StdEncoding.EncodeToString(b[:]), nil
}

// StandardWebhookKey is the HMAC key of the Standard Webhooks signature:
// the bytes the base64 part of the secret encodes. Secrets issued before
// the Standard Webhooks headers were in base64url without padding; they
// are decoded too (their receivers must decode the same way, or rotate).
func StandardWebhookKey(secret string) ([]byte, error) {
	enc, ok := strings.CutPrefix(secret, webhookSecretPrefix)
	if !ok {
		return nil, errors.New("domain: webhook secret lacks the whsec_ prefix")
	}
	for _, e := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if key, err := e.DecodeString(enc); err == nil && len(key) >= 24 {
			return key, nil
		}
	}
	return nil, errors.New("domain: webhook secret is not base64 of at least 24 bytes")
}

// SignStandardWebhook is one Standard Webhooks signature:
// "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)).
func SignStandardWebhook(key []byte, id string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write(strconv.AppendInt(nil, timestamp, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// SecretBox encrypts webhook secrets at rest with AES-256-GCM: the secret
// is needed to sign deliveries, so it cannot be stored as a hash.
type SecretBox struct{ aead cipher.AEAD }

// NewSecretBox returns a box for a 32-byte key (MARKET_SECRET_KEY).
func NewSecretBox(key []byte) (*SecretBox, error) {
	if len(key) != 32 {
		return nil, errors.New("domain: secret key must be 32 bytes")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &SecretBox{aead: aead}, nil
}

// Seal encrypts plain; the random nonce is prepended. aad binds the
// ciphertext to its row (the subscription id), so a ciphertext copied to
// another row does not open.
func (b *SecretBox) Seal(plain, aad []byte) ([]byte, error) {
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(plain)+b.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return b.aead.Seal(nonce, nonce, plain, aad), nil
}

// Open decrypts what Seal returned for the same aad.
func (b *SecretBox) Open(sealed, aad []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n {
		return nil, errors.New("domain: sealed secret too short")
	}
	return b.aead.Open(nil, sealed[:n], sealed[n:], aad)
}
