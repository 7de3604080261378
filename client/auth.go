package client

import (
	"context"
	"net/http"
)

// APIKey returns a request editor that sends key in the X-API-Key header,
// the API's one security scheme: pass it to NewClientWithResponses with
// WithRequestEditorFn.
func APIKey(key string) RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("X-API-Key", key)
		return nil
	}
}
