package admission

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"

	"github.com/marketscreener/market/domain"
)

// Recheck answers, for a request that lasts (an event stream), whether its
// key may still be served: 200 with the client as it is now (tier and
// markets may have changed), 401 for a key revoked since, or 403 for a
// client suspended or past its contract end. It charges nothing (the
// connection was admitted, and counted, once) and answers from the key
// cache, which the bus empties on a revocation: a stream that rechecks
// every 250 ms ends within a second of one. keyHash is the stored
// (hex) hash of the key.
func (g *Gate) Recheck(ctx context.Context, keyHash string) (Outcome, error) {
	d, err := hex.DecodeString(keyHash)
	if err != nil {
		return Outcome{Status: http.StatusUnauthorized, Detail: errUnknownKey.Message}, nil
	}
	now := g.now()
	f := g.keys.find(d, now)
	client, key, err := f.client, f.key, f.err
	if f.state != answered {
		client, key, err = g.keys.fetch(ctx, string(d), f, now)
	}
	if err != nil {
		var de *domain.Error
		if errors.As(err, &de) && de.Code == domain.EUNAUTHORIZED {
			return Outcome{Status: http.StatusUnauthorized, Detail: de.Message}, nil
		}
		return Outcome{}, err
	}
	if out, refused := refuseInactive(client, key, now); refused {
		return out, nil
	}
	return Outcome{Status: http.StatusOK, Client: client, Key: key}, nil
}
