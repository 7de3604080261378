package indicator

// Pivot is a swing high or low: a bar whose high (low) is not exceeded by
// the bars around it.
type Pivot struct {
	Index int     // bar index
	Price float64 // the high of a swing high, the low of a swing low
	High  bool    // true for a swing high
}

// SwingPivots finds swing highs and lows (TradingView ta.pivothigh /
// ta.pivotlow): bar i is a swing high when its high is above the highs of
// the left bars before it and not below the highs of the right bars after
// it (ties resolve to the earlier bar, so a flat top yields one pivot).
// Lows mirror this. Bars without `right` bars after them cannot be
// confirmed yet and are skipped. Pivots come in bar order.
func SwingPivots(high, low []float64, left, right int) []Pivot {
	// Two swing highs (lows) are more than min(left, right) bars apart.
	out := make([]Pivot, 0, 2*(len(high)/(min(left, right)+1)+1))
	for i := left; i+right < len(high); i++ {
		if swingHigh(high, i, left, right) {
			out = append(out, Pivot{Index: i, Price: high[i], High: true})
		}
		if swingLow(low, i, left, right) {
			out = append(out, Pivot{Index: i, Price: low[i]})
		}
	}
	return out
}

// swingHigh reports whether x[i] is above its left neighbours and not
// below its right ones; swingLow mirrors it. (Two functions rather than
// one taking the comparison: a scoring calls them for every bar.)
func swingHigh(x []float64, i, left, right int) bool {
	for _, v := range x[i-left : i] {
		if !(x[i] > v) {
			return false
		}
	}
	for _, v := range x[i+1 : i+right+1] {
		if v > x[i] {
			return false
		}
	}
	return true
}

func swingLow(x []float64, i, left, right int) bool {
	for _, v := range x[i-left : i] {
		if !(x[i] < v) {
			return false
		}
	}
	for _, v := range x[i+1 : i+right+1] {
		if v < x[i] {
			return false
		}
	}
	return true
}
