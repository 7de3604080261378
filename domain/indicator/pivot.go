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
	var out []Pivot
	for i := left; i+right < len(high); i++ {
		if isPivot(high, i, left, right, func(a, b float64) bool { return a > b }) {
			out = append(out, Pivot{Index: i, Price: high[i], High: true})
		}
		if isPivot(low, i, left, right, func(a, b float64) bool { return a < b }) {
			out = append(out, Pivot{Index: i, Price: low[i]})
		}
	}
	return out
}

// isPivot reports whether x[i] beats its left neighbours strictly and its
// right neighbours or ties them.
func isPivot(x []float64, i, left, right int, beats func(a, b float64) bool) bool {
	for j := i - left; j < i; j++ {
		if !beats(x[i], x[j]) {
			return false
		}
	}
	for j := i + 1; j <= i+right; j++ {
		if beats(x[j], x[i]) {
			return false
		}
	}
	return true
}
