package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
	"github.com/marketscreener/market/store/storetest"
)

// newClient is a fixture factory: a valid business client unless opts change it.
func newClient(t *testing.T, db *store.DB, mutate func(*domain.Client)) *domain.Client {
	t.Helper()
	c := &domain.Client{OrgName: "Acme", Tier: domain.Business, Markets: domain.Markets}
	if mutate != nil {
		mutate(c)
	}
	if err := db.CreateClient(context.Background(), c); err != nil {
		t.Fatalf("CreateClient: %v", err)
	}
	return c
}

func TestClientLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := newClient(t, db, func(c *domain.Client) {
		c.Tier, c.Markets, c.ContractExpiresAt = domain.Starter, []domain.Market{domain.Forex}, &exp
	})
	if c.ID == "" || c.Status != domain.StatusActive {
		t.Fatalf("created client = %+v", c)
	}
	got, err := db.Client(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.OrgName != "Acme" || got.Tier != domain.Starter || len(got.Markets) != 1 || !got.ContractExpiresAt.Equal(exp) {
		t.Fatalf("Client = %+v", got)
	}
	if _, err := db.SetClientStatus(ctx, c.ID, domain.StatusSuspended); err != nil {
		t.Fatal(err)
	}
	got, _ = db.Client(ctx, c.ID)
	if got.EffectiveStatus(time.Now()) != domain.StatusSuspended {
		t.Fatalf("status = %s, want suspended", got.Status)
	}
	up, err := db.SetClientTier(ctx, c.ID, domain.Business, domain.Markets)
	if err != nil || up.Tier != domain.Business || len(up.Markets) != 3 {
		t.Fatalf("SetClientTier = %+v, %v", up, err)
	}
	if _, err := db.SetClientTier(ctx, c.ID, domain.Starter, domain.Markets); domain.ErrorCode(err) != domain.EINVALID {
		t.Fatalf("starter with 3 markets: err = %v, want invalid", err)
	}
	if _, err := db.Client(ctx, "nope"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown id: err = %v", err)
	}
	if _, err := db.Client(ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown uuid: err = %v", err)
	}
	all, err := db.Clients(ctx)
	if err != nil || len(all) != 1 {
		t.Fatalf("Clients = %d, %v", len(all), err)
	}
}

func TestKeysIssueAuthenticateRevoke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.New(t)
	c := newClient(t, db, nil)
	key, rec, err := db.IssueKey(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !domain.CheckKeyFormat(key) || rec.Hash != domain.HashKey(key) || rec.Prefix != key[:domain.KeyDisplayLen] {
		t.Fatalf("issued key %q record %+v", key, rec)
	}
	gotC, gotK, err := db.Authenticate(ctx, domain.HashKey(key))
	if err != nil || gotC.ID != c.ID || gotK.ID != rec.ID || gotK.RevokedAt != nil {
		t.Fatalf("Authenticate = %+v %+v %v", gotC, gotK, err)
	}
	if _, _, err := db.Authenticate(ctx, domain.HashKey("msk_other")); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := db.RevokeKey(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	_, gotK, err = db.Authenticate(ctx, domain.HashKey(key))
	if err != nil || gotK.RevokedAt == nil {
		t.Fatalf("after revoke: %+v %v", gotK, err)
	}
	keys, err := db.Keys(ctx, c.ID)
	if err != nil || len(keys) != 1 || keys[0].RevokedAt == nil {
		t.Fatalf("Keys = %+v %v", keys, err)
	}
}

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	db := storetest.New(t)
	applied, err := db.Migrate(context.Background())
	if err != nil || len(applied) != 0 {
		t.Fatalf("second migrate applied %v, err %v", applied, err)
	}
	s, err := db.Schema(context.Background())
	if err != nil || s.Version != s.Binary || s.Binary < 1 || s.Problem() != nil || s.Skew() != "" {
		t.Fatalf("Schema = %+v %v, want at the binary's version", s, err)
	}
}
