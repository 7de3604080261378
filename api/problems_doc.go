package api

import (
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"
)

// problemExamples are the documented bodies of each error status: what a
// client really receives, so it can be coded against from the docs alone.
var problemExamples = map[int]map[string]*huma.ErrorModel{
	http.StatusBadRequest: {
		"invalid-market": {Type: problemTypes[400], Title: "Bad Request", Status: 400,
			Detail: `invalid parameter: path.market_type (bonds): expected value to be one of "crypto, forex, stocks"`,
			Errors: []*huma.ErrorDetail{{Location: "path.market_type", Value: "bonds", Message: `expected value to be one of "crypto, forex, stocks"`}}},
		"limit-out-of-range": {Type: problemTypes[400], Title: "Bad Request", Status: 400,
			Detail: "invalid parameter: query.limit (1001): expected number <= 1000",
			Errors: []*huma.ErrorDetail{{Location: "query.limit", Value: 1001, Message: "expected number <= 1000"}}},
	},
	http.StatusUnauthorized: {
		"missing-key": {Type: problemTypes[401], Title: "Unauthorized", Status: 401, Detail: "missing X-API-Key header"},
		"revoked-key": {Type: problemTypes[401], Title: "Unauthorized", Status: 401, Detail: "invalid API key: the key has been revoked"},
	},
	http.StatusForbidden: {
		"suspended":          {Type: problemTypes[403], Title: "Forbidden", Status: 403, Detail: "client suspended; contact support"},
		"market-not-in-tier": {Type: problemTypes[403], Title: "Forbidden", Status: 403, Detail: "the market forex is not included in your tier (allowed: [crypto])"},
	},
	http.StatusNotFound: {
		"unknown-combination": {Type: problemTypes[404], Title: "Not Found", Status: 404,
			Detail: "no crypto/kraken/spot in this region (global); available for crypto: binance/spot, binance/perpetual, binance/futures, okx/spot, okx/perpetual"},
	},
	http.StatusTooManyRequests: {
		"rate-limit":    {Type: problemTypes[429], Title: "Too Many Requests", Status: 429, Detail: msgRateLimited},
		"monthly-quota": {Type: problemTypes[429], Title: "Too Many Requests", Status: 429, Detail: msgQuotaExceeded},
	},
	http.StatusBadGateway: {
		"feed-failing": {Type: problemTypes[502], Title: "Bad Gateway", Status: 502,
			Detail: "the upstream feed of crypto/binance/spot is failing and the stored data is stale; retry later"},
	},
	http.StatusServiceUnavailable: {
		"starting": {Type: problemTypes[503], Title: "Service Unavailable", Status: 503,
			Detail: "the data service is not initialised yet (starting up or its database is unreachable); retry later"},
	},
}

// documentProblems attaches the examples to every documented error
// response and replaces huma's generic schema examples with ours. It also
// drops the 422 huma documents for operations with inputs: an invalid
// input is answered 400 (newProblem), and a generated client would
// otherwise carry a type for an answer that never comes.
func (s *Server) documentProblems() {
	oa := s.humaAPI.OpenAPI()
	if m := oa.Components.Schemas.Map()["ErrorModel"]; m != nil {
		if p := m.Properties["type"]; p != nil {
			// RFC 9457's type is a URI reference: ours are relative to
			// the deployment (huma says "uri", which refuses them).
			p.Format = "uri-reference"
			p.Examples = []any{problemTypes[400]}
		}
		if p := m.Properties["detail"]; p != nil {
			p.Examples = []any{"invalid parameter: query.limit (1001): expected number <= 1000"}
		}
		if p := m.Properties["instance"]; p != nil {
			p.Examples = nil
		}
	}
	for _, item := range oa.Paths {
		for _, op := range []*huma.Operation{item.Get, item.Post, item.Put, item.Patch, item.Delete} {
			if op == nil {
				continue
			}
			delete(op.Responses, strconv.Itoa(http.StatusUnprocessableEntity))
			for code, resp := range op.Responses {
				status, err := strconv.Atoi(code)
				if err != nil || problemExamples[status] == nil || resp.Content == nil {
					continue
				}
				mt := resp.Content["application/problem+json"]
				if mt == nil {
					continue
				}
				mt.Examples = map[string]*huma.Example{}
				for name, body := range problemExamples[status] {
					mt.Examples[name] = &huma.Example{Value: body}
				}
			}
		}
	}
}
