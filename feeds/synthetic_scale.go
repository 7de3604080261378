package feeds

import "math"

// SyntheticDefaultCryptoAssets is how many crypto base assets the synthetic
// feed lists by default: its fixed table.
const SyntheticDefaultCryptoAssets = 192

// SyntheticMaxCryptoAssets bounds the synthetic crypto universe: enough
// for scale benchmarks, small enough that the feed's tables stay a few MB.
const SyntheticMaxCryptoAssets = 20000

// cryptoAssets is the crypto base-asset list of a universe of n assets
// (0 = the default): the fixed table, truncated or extended with assets
// whose names and price levels are derived from the seed.
func (s *Synthetic) cryptoAssets(n int) []asset {
	table := parseAssets(syntheticCrypto)
	if n <= 0 || n == len(table) {
		return table
	}
	if n < len(table) {
		return table[:n]
	}
	taken := map[string]bool{"USD": true, "USDT": true, "USDC": true}
	for _, a := range table {
		taken[a.name] = true
	}
	out := table
	for i := len(table); i < n; i++ {
		name := s.syntheticAssetName(i, taken)
		taken[name] = true
		h := mix64(s.seed ^ hashString("crypto-level", name))
		// Price levels from 0.00001 to 1,000 USD, log-uniform: long-tail
		// tokens span micro-caps to mid-caps.
		price := math.Pow(10, -5+8*unit(h))
		out = append(out, asset{name: name, price: price, rank: i + 1})
	}
	return out
}

// syntheticAssetName derives a 3–6 letter ticker for generated asset i;
// a name already taken is re-drawn, so names are unique for a seed.
func (s *Synthetic) syntheticAssetName(i int, taken map[string]bool) string {
	for attempt := uint64(0); ; attempt++ {
		h := mix64(s.seed ^ hashString("crypto-name") + uint64(i)*0x9e3779b97f4a7c15 + attempt)
		n := 3 + int(h%4)
		b := make([]byte, n)
		for j := range b {
			h = mix64(h)
			b[j] = byte('A' + h%26)
		}
		if name := string(b); !taken[name] {
			return name
		}
	}
}

// scaledCount is how many of n base assets a combination that lists count
// of the default universe lists: the same share, at least one.
func scaledCount(count, n int) int {
	if n == SyntheticDefaultCryptoAssets || count == 0 {
		return count
	}
	return max(1, (count*n+SyntheticDefaultCryptoAssets-1)/SyntheticDefaultCryptoAssets)
}
