// Package faultproxy is a TCP proxy tests put between the service and
// Postgres or Redis to break, freeze or refuse its connections: the faults
// a dying or failing-over server causes, on the real server.
package faultproxy

import (
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/marketscreener/market/store/storetest"
)

// Proxy is a TCP proxy a test controls, between the service and
// Postgres or Redis: it forwards, breaks every connection at its next
// byte (EOF mid-query), freezes (holds every byte, answers nothing) or
// refuses (closes every connection at once, like a dead server).
type Proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	mode   string // "pass", "break", "freeze", "refuse"
	conns  map[net.Conn]struct{}
	wake   chan struct{}
}

// New starts a proxy to target (host:port), forwarding, closed when t ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, mode: "pass", conns: map[net.Conn]struct{}{}, wake: make(chan struct{})}
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.Set("refuse")
	})
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set changes the mode: "pass", "break", "freeze" or "refuse"; "refuse"
// also cuts what is open.
func (p *Proxy) Set(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
	close(p.wake)
	p.wake = make(chan struct{})
	if mode == "refuse" {
		for c := range p.conns {
			c.Close()
		}
	}
}

func (p *Proxy) state() (string, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.wake
}

func (p *Proxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if mode, _ := p.state(); mode == "refuse" {
			c.Close()
			continue
		}
		go p.handle(c)
	}
}

func (p *Proxy) handle(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.track(client, true)
	p.track(server, true)
	defer func() {
		client.Close()
		server.Close()
		p.track(client, false)
		p.track(server, false)
	}()
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client); done <- struct{}{} }()
	go func() { p.pipe(client, server); done <- struct{}{} }()
	<-done
}

// pipe copies src to dst chunk by chunk, obeying the mode before each chunk.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			for {
				mode, wake := p.state()
				if mode == "freeze" {
					<-wake
					continue
				}
				if mode != "pass" {
					return // break or refuse: the connection ends here
				}
				break
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// PostgresTarget is host:port of the test Postgres.
func PostgresTarget() string {
	u := storetest.DatabaseURL()
	i := strings.Index(u, "@")
	rest := u[i+1:]
	if j := strings.IndexAny(rest, "/?"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// Through rewrites a URL's host:port (target) to the proxy's.
func Through(url, target, proxy string) string {
	return strings.Replace(url, target, proxy, 1)
}
