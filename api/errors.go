package api

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/marketscreener/market/admission"
	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/store"
)

// The two 429 texts are the contract's own words; the gate writes them.
const (
	msgRateLimited   = admission.RateLimitedDetail
	msgQuotaExceeded = admission.QuotaExceededDetail
)

// statusOf is the one table from domain error codes to HTTP statuses.
var statusOf = map[string]int{
	domain.EINVALID:      http.StatusBadRequest,
	domain.EUNAUTHORIZED: http.StatusUnauthorized,
	domain.EFORBIDDEN:    http.StatusForbidden,
	domain.ENOTFOUND:     http.StatusNotFound,
	domain.ECONFLICT:     http.StatusConflict,
	domain.ERATELIMIT:    http.StatusTooManyRequests,
	domain.EQUOTA:        http.StatusTooManyRequests,
	domain.EUPSTREAM:     http.StatusBadGateway,
	domain.EUNAVAILABLE:  http.StatusServiceUnavailable,
	domain.EINTERNAL:     http.StatusInternalServerError,
}

// problemTypes give each kind of problem a stable URI reference, so clients
// can branch on "type" rather than on "detail" text. They resolve to the
// docs page's error section.
var problemTypes = map[int]string{
	http.StatusBadRequest:          "/docs#errors-invalid-parameter",
	http.StatusUnauthorized:        "/docs#errors-unauthorized",
	http.StatusForbidden:           "/docs#errors-forbidden",
	http.StatusNotFound:            "/docs#errors-not-found",
	http.StatusConflict:            "/docs#errors-conflict",
	http.StatusTooManyRequests:     "/docs#errors-too-many-requests",
	http.StatusBadGateway:          "/docs#errors-upstream",
	http.StatusServiceUnavailable:  "/docs#errors-unavailable",
	http.StatusInternalServerError: "/docs#errors-internal",
}

func init() {
	// huma reports validation failures as 422; our contract says 400 for
	// every invalid parameter (DESIGN §3), with errors[] naming it.
	huma.NewError = newProblem
}

func newProblem(status int, msg string, errs ...error) huma.StatusError {
	if status == http.StatusUnprocessableEntity {
		status = http.StatusBadRequest
	}
	details := make([]*huma.ErrorDetail, 0, len(errs))
	for _, e := range errs {
		if e == nil {
			continue
		}
		if d, ok := e.(huma.ErrorDetailer); ok {
			details = append(details, d.ErrorDetail())
		} else {
			details = append(details, &huma.ErrorDetail{Message: e.Error()})
		}
	}
	if status == http.StatusBadRequest && msg == "validation failed" && len(details) > 0 {
		msg = "invalid parameter: " + describeDetail(details[0])
	}
	return &huma.ErrorModel{
		Type:   problemTypes[status],
		Status: status,
		Title:  http.StatusText(status),
		Detail: msg,
		Errors: details,
	}
}

func describeDetail(d *huma.ErrorDetail) string {
	if d.Location == "" {
		return d.Message
	}
	return fmt.Sprintf("%s (%v): %s", d.Location, d.Value, d.Message)
}

// toProblem maps an error from the domain or store to the client-facing
// problem. Internal errors are logged once with the request id and hidden.
func toProblem(logger *slog.Logger, reqID string, err error) error {
	var se huma.StatusError
	if errors.As(err, &se) {
		return err // with the headers it may carry (huma.ErrorWithHeaders)
	}
	var de *domain.Error
	if errors.As(err, &de) {
		status, ok := statusOf[de.Code]
		if ok && status != http.StatusInternalServerError {
			details := make([]error, 0, len(de.Fields))
			for _, f := range de.Fields {
				details = append(details, &huma.ErrorDetail{Location: f.Location, Value: jsonSafe(f.Value), Message: f.Message})
			}
			p := newProblem(status, de.Message, details...)
			if status == http.StatusServiceUnavailable {
				logger.Warn("service unavailable", "request_id", reqID, "err", err)
				return huma.ErrorWithHeaders(p, http.Header{"Retry-After": {"5"}})
			}
			return p
		}
	}
	if store.Unavailable(err) {
		// A dependency broke, froze past the request's budget or refused
		// connections: the service is unavailable, not broken.
		logger.Warn("service unavailable", "request_id", reqID, "err", err)
		return huma.ErrorWithHeaders(newProblem(http.StatusServiceUnavailable,
			"the service is temporarily unavailable (a dependency did not answer in time); retry later"),
			http.Header{"Retry-After": {"5"}})
	}
	logger.Error("internal error", "request_id", reqID, "err", err)
	return newProblem(http.StatusInternalServerError, "internal error; the request id identifies it in our logs ("+reqID+")")
}

// jsonSafe keeps a problem encodable: NaN and ±Inf have no JSON form.
func jsonSafe(v any) any {
	if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return fmt.Sprint(f)
	}
	return v
}

// writeError writes err as the problem toProblem maps it to, with the
// headers it carries, through huma's error writer.
func (s *Server) writeError(ctx huma.Context, err error) {
	perr := toProblem(s.cfg.Logger, infoFrom(ctx.Context()).ID, err)
	var he huma.HeadersError
	if errors.As(perr, &he) {
		for k, vs := range he.GetHeaders() {
			for _, v := range vs {
				ctx.AppendHeader(k, v)
			}
		}
	}
	var p huma.StatusError
	if !errors.As(perr, &p) {
		p = newProblem(http.StatusInternalServerError, "internal error")
	}
	_ = huma.WriteErr(s.humaAPI, ctx, p.GetStatus(), problemDetail(p), problemErrors(p)...)
}

func problemDetail(p huma.StatusError) string {
	if m, ok := p.(*huma.ErrorModel); ok {
		return m.Detail
	}
	return p.Error()
}

func problemErrors(p huma.StatusError) []error {
	m, ok := p.(*huma.ErrorModel)
	if !ok {
		return nil
	}
	out := make([]error, len(m.Errors))
	for i, d := range m.Errors {
		out[i] = d
	}
	return out
}
