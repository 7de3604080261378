package push

import (
	"fmt"
	"math"
	"strconv"
)

// decimal is an exchange decimal string, its field name for errors, and
// where its value goes.
type decimal struct {
	name string
	raw  string
	dst  *float64
}

// decimals parses fields in order and stops at the first that is missing
// or not a finite number.
func decimals(fields ...decimal) error {
	for _, f := range fields {
		v, err := strconv.ParseFloat(f.raw, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: %q is not a finite number", f.name, f.raw)
		}
		*f.dst = v
	}
	return nil
}
