package api

import (
	"context"
	"sync"
)

// replayPool hands out the replica's replay tokens (Config.StreamReplays,
// one per replay page whose database work is running), at most share of
// them to one client at a time: a client resuming many streams at once
// waits for its own pages, never takes every token, so another client's
// resume is not starved. The share is half the tokens (1 when there are
// 2 or 3).
type replayPool struct {
	tokens chan struct{}
	share  int

	mu      sync.Mutex
	clients map[string]*clientReplays // guarded by mu
}

// clientReplays is one client's tokens in use, and how many of its
// replays hold or wait for one (the entry goes when none does).
type clientReplays struct {
	tokens chan struct{}
	users  int
}

func newReplayPool(n int) *replayPool {
	return &replayPool{tokens: make(chan struct{}, n), share: max(1, n/2), clients: make(map[string]*clientReplays)}
}

// acquire waits for one of the client's share and a token of the pool,
// in that order (a client over its share waits without holding a pool
// token), or for ctx to end. release gives both back.
func (p *replayPool) acquire(ctx context.Context, clientID string) (release func(), err error) {
	p.mu.Lock()
	c := p.clients[clientID]
	if c == nil {
		c = &clientReplays{tokens: make(chan struct{}, p.share)}
		p.clients[clientID] = c
	}
	c.users++
	p.mu.Unlock()
	leave := func() {
		p.mu.Lock()
		if c.users--; c.users == 0 {
			delete(p.clients, clientID)
		}
		p.mu.Unlock()
	}
	select {
	case c.tokens <- struct{}{}:
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
	select {
	case p.tokens <- struct{}{}:
	case <-ctx.Done():
		<-c.tokens
		leave()
		return nil, ctx.Err()
	}
	return func() {
		<-p.tokens
		<-c.tokens
		leave()
	}, nil
}
