// Package admissiontest holds the fixtures the tests of admission and of
// its users share.
package admissiontest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/marketscreener/market/domain"
)

// Keys is the keys table as a key cache's loader sees it (Load): keys h1
// and h2 of the business client c1, h3 of the starter client c2, both
// active. Lookups are counted; Fail makes them fail and Gate, when set,
// holds them until it is closed. Mu guards Keys, Clients and Fail.
type Keys struct {
	Mu      sync.Mutex
	Keys    map[string]*domain.APIKey
	Clients map[string]*domain.Client
	Fail    error
	Gate    chan struct{}
	Loads   atomic.Int64
}

// NewKeys returns the table described on Keys.
func NewKeys() *Keys {
	return &Keys{
		Keys: map[string]*domain.APIKey{
			"h1": {ID: "k1", ClientID: "c1", Hash: "h1"},
			"h2": {ID: "k2", ClientID: "c1", Hash: "h2"},
			"h3": {ID: "k3", ClientID: "c2", Hash: "h3"},
		},
		Clients: map[string]*domain.Client{
			"c1": {ID: "c1", Tier: domain.Business, Status: domain.StatusActive},
			"c2": {ID: "c2", Tier: domain.Starter, Status: domain.StatusActive},
		},
	}
}

// Load is the loader: copies of the key of hash and of its client.
func (f *Keys) Load(_ context.Context, hash string) (*domain.Client, *domain.APIKey, error) {
	f.Loads.Add(1)
	if f.Gate != nil {
		<-f.Gate
	}
	f.Mu.Lock()
	defer f.Mu.Unlock()
	if f.Fail != nil {
		return nil, nil, f.Fail
	}
	k := f.Keys[hash]
	if k == nil {
		return nil, nil, domain.ErrNotFound
	}
	key, client := *k, *f.Clients[k.ClientID]
	return &client, &key, nil
}

// Revoke revokes the key of hash as of now.
func (f *Keys) Revoke(hash string) {
	f.Mu.Lock()
	defer f.Mu.Unlock()
	now := time.Now()
	f.Keys[hash].RevokedAt = &now
}
