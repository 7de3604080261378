package domain

// Tier is the commercial tier of a client.
type Tier string

// The tiers, lower-case on the wire.
const (
	Starter    Tier = "starter"
	Business   Tier = "business"
	Enterprise Tier = "enterprise"
)

// Tiers lists every tier, smallest first.
var Tiers = []Tier{Starter, Business, Enterprise}

// TierLimits are the default limits of a tier (spec "Limits").
type TierLimits struct {
	RatePerMinute int
	MonthlyQuota  *int64 // nil = unlimited
}

// Limits returns the tier's default limits.
func (t Tier) Limits() TierLimits {
	switch t {
	case Starter:
		return TierLimits{RatePerMinute: 30, MonthlyQuota: ptr(int64(20000))}
	case Business:
		return TierLimits{RatePerMinute: 120, MonthlyQuota: ptr(int64(150000))}
	default:
		return TierLimits{RatePerMinute: 600}
	}
}

// Valid reports whether t is a known tier.
func (t Tier) Valid() bool { return t == Starter || t == Business || t == Enterprise }

// ParseTier parses a tier name, case-insensitively.
func ParseTier(s string) (Tier, error) {
	t := Tier(toLower(s))
	if !t.Valid() {
		return "", Errorf(EINVALID, "unknown tier %q (allowed: starter, business, enterprise)", s)
	}
	return t, nil
}

func ptr[T any](v T) *T { return &v }

func toLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
