// Package webhook sends one signed webhook request through the hardened
// delivery client: https only, no redirects, no proxy, every resolved
// address checked at dial time, bounded answers, errors reduced to
// categories. The worker's dispatcher and the api's test ping both send
// through it, so a ping proves what a delivery would do.
package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/marketscreener/market/domain"
)

// Delivery limits (DESIGN §3).
const (
	// Timeout bounds one attempt, from the dial to the last byte read.
	Timeout = 10 * time.Second
	// MaxResponseBytes of the answer's body are read, the rest discarded.
	MaxResponseBytes = 64 << 10
	// MaxResponseHeaderBytes caps the answer's headers.
	MaxResponseHeaderBytes = 16 << 10
)

// forbiddenAddrError refuses a dial to an internal address. Its text names
// neither the host nor the address: it may reach a client.
type forbiddenAddrError struct{}

func (forbiddenAddrError) Error() string {
	return "refused to connect: the host resolves only to private or internal addresses"
}

// forbiddenPortError refuses a dial to a port callbacks may not use
// (domain.AllowedCallbackPort): a subscription made before the rule, or a
// URL that bypassed it.
type forbiddenPortError struct{}

func (forbiddenPortError) Error() string {
	return "refused to connect: callbacks may not use this port"
}

// noAddressError: the host resolved to nothing.
type noAddressError struct{}

func (noAddressError) Error() string { return "the host has no address" }

// ClientConfig configures the delivery HTTP client.
type ClientConfig struct {
	// AllowPrivate lets deliveries reach loopback and private addresses
	// (tests only: MARKET_WEBHOOK_ALLOW_PRIVATE).
	AllowPrivate bool
	// ExtraRootsPEM are CA certificates trusted besides the system roots
	// (a test CA: MARKET_WEBHOOK_CA_FILE).
	ExtraRootsPEM []byte
	// Resolver resolves callback hosts (nil: the system resolver).
	Resolver *net.Resolver
	// MaxIdleConnsPerHost is how many idle connections to one host are
	// kept for reuse (0: 4).
	MaxIdleConnsPerHost int
}

// NewClient returns the delivery client: TLS 1.2+ only (the URLs are
// https), redirects not followed, no proxy, a 10 s time-out, response
// headers capped at 16 KiB, and a dialer that checks every address a host
// resolves to at dial time (so DNS rebinding cannot reach an internal
// address) and connects only to a checked one.
func NewClient(cfg ClientConfig) *http.Client {
	resolver := cfg.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("bad port: %w", err)
		}
		if !domain.AllowedCallbackPort(int(p)) {
			return nil, forbiddenPortError{}
		}
		ips, err := resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
		var lastErr error
		for _, ip := range ips {
			if !cfg.AllowPrivate && domain.ForbiddenIP(ip) {
				if lastErr == nil {
					lastErr = forbiddenAddrError{}
				}
				continue
			}
			conn, err := dialer.DialContext(ctx, network, netip.AddrPortFrom(ip.Unmap(), uint16(p)).String())
			if err == nil {
				return conn, nil
			}
			lastErr = err
		}
		if lastErr == nil {
			lastErr = noAddressError{}
		}
		return nil, lastErr
	}
	var roots *x509.CertPool // nil: the system roots
	if len(cfg.ExtraRootsPEM) > 0 {
		if sys, err := x509.SystemCertPool(); err == nil && sys != nil {
			roots = sys
		} else {
			roots = x509.NewCertPool()
		}
		roots.AppendCertsFromPEM(cfg.ExtraRootsPEM)
	}
	idle := cfg.MaxIdleConnsPerHost
	if idle <= 0 {
		idle = 4
	}
	transport := &http.Transport{
		Proxy:                  nil,
		DialContext:            dial,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots},
		TLSHandshakeTimeout:    5 * time.Second,
		ResponseHeaderTimeout:  Timeout,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
		MaxIdleConnsPerHost:    idle,
		IdleConnTimeout:        30 * time.Second,
	}
	return &http.Client{
		Transport: transport,
		Timeout:   Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// classify reduces a failed request to its category. The driver's error
// text (resolver addresses, resolved IPs, host names) stays out of it.
func classify(err error) domain.DeliveryError {
	var (
		forbidden forbiddenAddrError
		badPort   forbiddenPortError
		noAddr    noAddressError
		dnsErr    *net.DNSError
		opErr     *net.OpError
		certErr   *tls.CertificateVerificationError
		recErr    tls.RecordHeaderError
		alertErr  tls.AlertError
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &forbidden), errors.As(err, &badPort):
		return domain.DeliveryError{Category: domain.ErrAddressRefused}
	case errors.As(err, &dnsErr), errors.As(err, &noAddr):
		return domain.DeliveryError{Category: domain.ErrDNS}
	case errors.As(err, &certErr), errors.As(err, &recErr), errors.As(err, &alertErr), errors.As(err, &unknownCA),
		errors.As(err, &hostErr), errors.As(err, &invalid), errors.As(err, &opErr) && opErr.Op == "remote error":
		return domain.DeliveryError{Category: domain.ErrTLS}
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return domain.DeliveryError{Category: domain.ErrConnect}
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return domain.DeliveryError{Category: domain.ErrTimeout}
	}
	return domain.DeliveryError{Category: domain.ErrBadResponse}
}

// serverSpokeTLS reports whether a failed request's TLS handshake got an
// answer from a TLS server: a certificate we refuse, or an alert. (A
// server that answers something else than TLS is not one.)
func serverSpokeTLS(err error) bool {
	var (
		opErr     *net.OpError
		certErr   *tls.CertificateVerificationError
		alertErr  tls.AlertError
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	return errors.As(err, &certErr) || errors.As(err, &alertErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr) ||
		errors.As(err, &invalid) || errors.As(err, &opErr) && opErr.Op == "remote error"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
