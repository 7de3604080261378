package domain

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"hash/crc32"
	"math/big"
	"time"
)

// API key format: "msk_" + 43 base62 characters (32 random bytes) + 6 base62
// characters of CRC32 over the first part. The checksum lets the api reject
// typos and garbage before any lookup; only a SHA-256 hash is stored.
const (
	KeyPrefix      = "msk_"
	keyBodyLen     = 43
	keyChecksumLen = 6
	// KeyLen is the total length of a key.
	KeyLen = len(KeyPrefix) + keyBodyLen + keyChecksumLen
	// KeyDisplayLen is how many leading characters of a key are kept in clear
	// (the "prefix" shown by keys list), enough to recognise a key, far too
	// few to guess it.
	KeyDisplayLen = len(KeyPrefix) + 6
	// SandboxKeyLen is the length of a sandbox key: SandboxKeyPrefix instead
	// of KeyPrefix, the same body and checksum.
	SandboxKeyLen = len(SandboxKeyPrefix) + keyBodyLen + keyChecksumLen
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// APIKey is a stored key: never the key itself.
type APIKey struct {
	ID        string
	ClientID  string
	Prefix    string
	Hash      string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// NewKey returns a fresh random key in the documented format.
func NewKey() (string, error) { return newKey(KeyPrefix) }

// NewSandboxKey returns a fresh random sandbox key: "msk_test_", then the
// body and checksum of a live key (the checksum covers the prefix too).
func NewSandboxKey() (string, error) { return newKey(SandboxKeyPrefix) }

func newKey(prefix string) (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	body := prefix + encodeBase62(new(big.Int).SetBytes(b[:]), keyBodyLen)
	sum := checksum(body)
	return body + string(sum[:]), nil
}

// ValidKeyLen reports whether n is the length of a live or a sandbox key.
func ValidKeyLen(n int) bool { return n == KeyLen || n == SandboxKeyLen }

// CheckKeyFormat reports whether key has the documented shape (a live or a
// sandbox key) and a matching checksum. It runs before any lookup.
func CheckKeyFormat(key string) bool {
	prefix := KeyPrefix
	if len(key) == SandboxKeyLen {
		prefix = SandboxKeyPrefix
	}
	if len(key) != len(prefix)+keyBodyLen+keyChecksumLen || key[:len(prefix)] != prefix {
		return false
	}
	for i := len(prefix); i < len(key); i++ {
		if !isBase62(key[i]) {
			return false
		}
	}
	body := key[:len(key)-keyChecksumLen]
	want := checksum(body)
	return subtle.ConstantTimeCompare(want[:], []byte(key[len(body):])) == 1
}

// checksum is the base62 CRC32 of a key's body, without allocations: it
// runs on every request.
func checksum(body string) [keyChecksumLen]byte {
	var out [keyChecksumLen]byte
	var buf [SandboxKeyLen]byte // on the stack: []byte(body) would allocate
	n := uint64(crc32.ChecksumIEEE(append(buf[:0], body...)))
	for i := keyChecksumLen - 1; i >= 0; i-- {
		out[i] = base62[n%62]
		n /= 62
	}
	return out
}

// HashKey returns the stored form of a key: lowercase hex SHA-256.
func HashKey(key string) string {
	h := KeyDigest(key)
	return hex.EncodeToString(h[:])
}

// KeyDigest is the SHA-256 of a key: HashKey before its hex encoding.
func KeyDigest(key string) [sha256.Size]byte {
	var buf [2 * KeyLen]byte // on the stack for keys of the documented length
	return sha256.Sum256(append(buf[:0], key...))
}

// KeyHashEqual compares two key hashes in constant time.
func KeyHashEqual(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// KeyDisplayPrefix returns the part of a key that may be shown and stored in clear.
// A sandbox key keeps its whole "msk_test_" prefix and 6 more.
func KeyDisplayPrefix(key string) string {
	n := KeyDisplayLen
	if len(key) == SandboxKeyLen && key[:len(SandboxKeyPrefix)] == SandboxKeyPrefix {
		n = len(SandboxKeyPrefix) + 6
	}
	if len(key) < n {
		return key
	}
	return key[:n]
}

func isBase62(c byte) bool {
	return ('0' <= c && c <= '9') || ('A' <= c && c <= 'Z') || ('a' <= c && c <= 'z')
}

func encodeBase62(n *big.Int, width int) string {
	out := make([]byte, width)
	base := big.NewInt(62)
	mod := new(big.Int)
	n = new(big.Int).Set(n)
	for i := width - 1; i >= 0; i-- {
		n.DivMod(n, base, mod)
		out[i] = base62[mod.Int64()]
	}
	return string(out)
}
