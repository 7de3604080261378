package domain

import (
	"errors"
	"fmt"
)

// Error codes: the api maps each code to one HTTP status in one table.
const (
	EINVALID      = "invalid"      // bad input: 400
	EUNAUTHORIZED = "unauthorized" // missing, malformed, unknown or revoked key: 401
	EFORBIDDEN    = "forbidden"    // suspended/expired client or market outside the tier: 403
	ENOTFOUND     = "not_found"    // 404
	ECONFLICT     = "conflict"     // 409
	ERATELIMIT    = "rate_limited" // 429
	EQUOTA        = "quota"        // 429
	EUPSTREAM     = "upstream"     // failing feed and stale data: 502
	EUNAVAILABLE  = "unavailable"  // not ready: 503
	EINTERNAL     = "internal"     // 500, text never shown to clients
)

// Sentinel errors for the common cases; compare with errors.Is.
var (
	ErrNotFound = &Error{Code: ENOTFOUND, Message: "not found"}
	ErrConflict = &Error{Code: ECONFLICT, Message: "conflict"}
)

// FieldError names one bad parameter: where it is, its value and what is allowed.
type FieldError struct {
	Location string // e.g. "path.market_type", "query.limit"
	Value    any
	Message  string // e.g. "must be one of crypto, forex, stocks"
}

// Error is an application error with a machine-readable code and a
// client-safe message.
type Error struct {
	Code    string
	Message string
	Fields  []FieldError
}

func (e *Error) Error() string {
	if len(e.Fields) == 0 {
		return fmt.Sprintf("%s: %s", e.Code, e.Message)
	}
	return fmt.Sprintf("%s: %s (%s %v: %s)", e.Code, e.Message, e.Fields[0].Location, e.Fields[0].Value, e.Fields[0].Message)
}

// Is makes errors.Is(err, ErrNotFound) match any Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Message == e.Message || t == ErrNotFound || t == ErrConflict)
}

// Errorf returns an Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Invalid returns an EINVALID error naming one parameter.
func Invalid(location string, value any, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	return &Error{Code: EINVALID, Message: fmt.Sprintf("invalid %s: %s", paramName(location), msg),
		Fields: []FieldError{{Location: location, Value: value, Message: msg}}}
}

func paramName(location string) string {
	for i := len(location) - 1; i >= 0; i-- {
		if location[i] == '.' {
			return location[i+1:]
		}
	}
	return location
}

// ErrorCode returns the code of an Error in err's chain, or EINTERNAL.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}
