package readcache

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"strconv"
	"time"
)

// Body is an encoded response body cached with its validators: the strong
// entity tag and the modification time are computed once, when the body
// is built, so a conditional request costs a comparison, not a hash.
type Body struct {
	Bytes []byte
	// ETag is the strong entity tag of Bytes, quoted ("…").
	ETag string
	// Modified is when the data in Bytes last changed (whole seconds,
	// UTC); zero when unknown. LastModified is its HTTP-date form ("" when
	// zero).
	Modified     time.Time
	LastModified string
	// Length is len(Bytes) in decimal: the Content-Length of a 200,
	// formatted once per body.
	Length string
}

// NewBody computes the validators of b, whose data last changed at modified.
func NewBody(b []byte, modified time.Time) Body {
	return NewBodyTagged(b, modified, b)
}

// NewBodyTagged is NewBody with the entity tag computed over tagged
// instead of b: for a body that is a function of other parts (their own
// tags, the parameters), cheaper to hash than the body itself. The parts
// must determine b exactly, so that different bodies get different tags.
func NewBodyTagged(b []byte, modified time.Time, tagged ...[]byte) Body {
	h := sha256.New()
	var n [8]byte
	for _, p := range tagged {
		// Each part is prefixed by its length, so parts cannot run into each other.
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		_, _ = h.Write(n[:])
		_, _ = h.Write(p)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	// 16 bytes (128 bits) of SHA-256: collisions are out of reach, and
	// the tag stays short on the wire.
	tag := make([]byte, 0, 2+base64.RawURLEncoding.EncodedLen(16))
	tag = append(tag, '"')
	tag = base64.RawURLEncoding.AppendEncode(tag, sum[:16])
	tag = append(tag, '"')
	out := Body{Bytes: b, ETag: string(tag), Length: strconv.Itoa(len(b))}
	if !modified.IsZero() {
		out.Modified = modified.UTC().Truncate(time.Second)
		out.LastModified = out.Modified.Format(http.TimeFormat)
	}
	return out
}
