package store

import (
	"encoding/binary"
	"errors"
	"math"
	"time"

	"github.com/marketscreener/market/domain"
)

// A candle block (table candle_blocks, migration 00026) holds the candles
// of one series and one period (CandleBlockStart) packed into one bytea, so that
// a candle older than the hot window costs its values and not a row, a
// tuple header and an index entry. The packing is lossless by
// construction: every value is encoded in a form whose decoding is
// checked, bit for bit, before the form is chosen.
//
// Layout (docs/candle-storage.md):
//
//	byte     format (packFormat)
//	uvarint  n, the number of candles
//	varint   step, µs (the timeframe's duration)
//	varint   the first open time, Unix µs
//	n-1 ×    varint (open time − previous open time − step): 0 in a series without holes
//	byte     pricesApart or pricesTogether, then
//	         pricesTogether: byte k, then per candle 4 varints (packPrices)
//	         pricesApart: 4 columns, open, high, low, close
//	         a column: volume
//
// A column is either decimal (a byte k ≤ maxDecimalScale, then the varint
// deltas of the integers v·10^k, when every v of the column is exactly
// float64(int)/10^k: prices and volumes in an exchange's tick sizes) or
// bits (the byte bitsColumn, then the uvarint XOR of each value's IEEE 754
// bits with the previous value's, which keeps any float64 exactly).
const packFormat = 1

// maxDecimalScale is the largest power of ten a decimal column is scaled
// by; bitsColumn marks a column stored as XORed bits.
const (
	maxDecimalScale = 15
	bitsColumn      = 0xff
)

// pow10 are the exact float64 powers of ten a decimal column uses.
var pow10 = func() [maxDecimalScale + 1]float64 {
	var p [maxDecimalScale + 1]float64
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

var errBadBlock = errors.New("store: candle block: malformed")

// packCandles packs candles of one series, oldest first with strictly
// increasing open times (as a block holds them), of a timeframe of the
// given step.
func packCandles(cs []domain.Candle, step time.Duration) []byte {
	out := make([]byte, 0, 16+len(cs)*16)
	out = append(out, packFormat)
	out = binary.AppendUvarint(out, uint64(len(cs)))
	stepUs := step.Microseconds()
	out = binary.AppendVarint(out, stepUs)
	var prev int64
	for i, c := range cs {
		t := c.Time.UnixMicro()
		if i == 0 {
			out = binary.AppendVarint(out, t)
		} else {
			out = binary.AppendVarint(out, t-prev-stepUs)
		}
		prev = t
	}
	col := make([]float64, len(cs))
	fields := candleFields[:]
	if k, ok := priceScale(cs); ok {
		out = append(out, pricesTogether, byte(k))
		out = packPrices(out, cs, k)
		fields = candleFields[4:]
	} else {
		out = append(out, pricesApart)
	}
	for _, field := range fields {
		for i := range cs {
			col[i] = *field(&cs[i])
		}
		out = packColumn(out, col)
	}
	return out
}

// Whether open, high, low and close are packed together (pricesTogether:
// one decimal scale k for the four, then per candle the varints of close −
// the previous close, open − the previous close, high − max(open, close)
// and min(open, close) − low: the body and the wicks, small numbers where
// the four columns' own deltas are each as large as the move) or as four
// columns (pricesApart).
const (
	pricesApart    = 0
	pricesTogether = 1
)

// priceScale returns a decimal scale every open, high, low and close of
// cs decodes from exactly (the largest of the columns' smallest scales,
// checked for all four), or false.
func priceScale(cs []domain.Candle) (int, bool) {
	col := make([]float64, len(cs))
	k := 0
	for _, field := range candleFields[:4] {
		for i := range cs {
			col[i] = *field(&cs[i])
		}
		kf, ok := decimalScale(col)
		if !ok {
			return 0, false
		}
		k = max(k, kf)
	}
	for _, field := range candleFields[:4] {
		for i := range cs {
			if !fitsScale(*field(&cs[i]), k) {
				return 0, false
			}
		}
	}
	return k, true
}

func packPrices(out []byte, cs []domain.Candle, k int) []byte {
	scaled := func(v float64) int64 { return int64(math.Round(v * pow10[k])) }
	var prevClose int64
	for i := range cs {
		o, h, l, c := scaled(cs[i].Open), scaled(cs[i].High), scaled(cs[i].Low), scaled(cs[i].Close)
		out = binary.AppendVarint(out, c-prevClose)
		out = binary.AppendVarint(out, o-prevClose)
		out = binary.AppendVarint(out, h-max(o, c))
		out = binary.AppendVarint(out, min(o, c)-l)
		prevClose = c
	}
	return out
}

func unpackPrices(r *blockReader, out []domain.Candle, k int) {
	var prevClose int64
	for i := range out {
		c := prevClose + r.varint()
		o := prevClose + r.varint()
		h := max(o, c) + r.varint()
		l := min(o, c) - r.varint()
		out[i].Open, out[i].High = float64(o)/pow10[k], float64(h)/pow10[k]
		out[i].Low, out[i].Close = float64(l)/pow10[k], float64(c)/pow10[k]
		prevClose = c
	}
}

// candleFields are the packed columns, in their order.
var candleFields = [5]func(c *domain.Candle) *float64{
	func(c *domain.Candle) *float64 { return &c.Open },
	func(c *domain.Candle) *float64 { return &c.High },
	func(c *domain.Candle) *float64 { return &c.Low },
	func(c *domain.Candle) *float64 { return &c.Close },
	func(c *domain.Candle) *float64 { return &c.Volume },
}

func packColumn(out []byte, vs []float64) []byte {
	if k, ok := decimalScale(vs); ok {
		out = append(out, byte(k))
		var prev int64
		for _, v := range vs {
			m := int64(math.Round(v * pow10[k]))
			out = binary.AppendVarint(out, m-prev)
			prev = m
		}
		return out
	}
	out = append(out, bitsColumn)
	var prev uint64
	for _, v := range vs {
		b := math.Float64bits(v)
		out = binary.AppendUvarint(out, b^prev)
		prev = b
	}
	return out
}

// decimalScale returns the smallest k such that every value decodes from
// its integer int64(round(v·10^k)) as float64(m)/10^k to the same bits
// (the decoder's exact expression), or false.
func decimalScale(vs []float64) (int, bool) {
next:
	for k := 0; k <= maxDecimalScale; k++ {
		for _, v := range vs {
			if !(math.Abs(v*pow10[k]) < 1<<53) {
				return 0, false // a larger k only grows it (or v is not finite)
			}
			if !fitsScale(v, k) {
				continue next
			}
		}
		return k, true
	}
	return 0, false
}

// fitsScale reports whether v is exactly float64(m)/10^k for its integer
// m = int64(round(v·10^k)), |m| < 2^53, the decoder's expression; the
// differences of two such integers then fit an int64.
func fitsScale(v float64, k int) bool {
	s := v * pow10[k]
	if !(math.Abs(s) < 1<<53) {
		return false
	}
	m := int64(math.Round(s))
	return math.Float64bits(float64(m)/pow10[k]) == math.Float64bits(v)
}

// unpackCandles decodes a block, oldest first.
func unpackCandles(b []byte) ([]domain.Candle, error) {
	if len(b) == 0 || b[0] != packFormat {
		return nil, errBadBlock
	}
	r := blockReader{b: b[1:]}
	n := r.uvarint()
	if r.err != nil || n > uint64(len(b)) { // every candle takes at least a byte
		return nil, errBadBlock
	}
	out := make([]domain.Candle, n)
	step := r.varint()
	var t int64
	for i := range out {
		if i == 0 {
			t = r.varint()
		} else {
			t += r.varint() + step
		}
		out[i].Time = time.UnixMicro(t).UTC()
	}
	fields := candleFields[:]
	switch r.byte() {
	case pricesApart:
	case pricesTogether:
		k := r.byte()
		if k > maxDecimalScale {
			return nil, errBadBlock
		}
		unpackPrices(&r, out, int(k))
		fields = candleFields[4:]
	default:
		return nil, errBadBlock
	}
	for _, field := range fields {
		mode := r.byte()
		switch {
		case r.err != nil:
		case mode <= maxDecimalScale:
			var m int64
			for i := range out {
				m += r.varint()
				*field(&out[i]) = float64(m) / pow10[mode]
			}
		case mode == bitsColumn:
			var bits uint64
			for i := range out {
				bits ^= r.uvarint()
				*field(&out[i]) = math.Float64frombits(bits)
			}
		default:
			return nil, errBadBlock
		}
	}
	if r.err != nil || len(r.b) != 0 {
		return nil, errBadBlock
	}
	return out, nil
}

// blockReader reads varints off a block, keeping the first error.
type blockReader struct {
	b   []byte
	err error
}

func (r *blockReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err, r.b = errBadBlock, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *blockReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err, r.b = errBadBlock, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *blockReader) byte() byte {
	if len(r.b) == 0 {
		r.err = errBadBlock
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// mergeCandles merges two series, each oldest first with strictly
// increasing times, into one; at an open time both have, the candle of
// winner is kept (a hot row over a block's, a moved row over the block it
// joins).
func mergeCandles(older, winner []domain.Candle) []domain.Candle {
	if len(older) == 0 {
		return winner
	}
	if len(winner) == 0 {
		return older
	}
	out := make([]domain.Candle, 0, len(older)+len(winner))
	i, j := 0, 0
	for i < len(older) && j < len(winner) {
		switch c := older[i].Time.Compare(winner[j].Time); {
		case c < 0:
			out = append(out, older[i])
			i++
		case c > 0:
			out = append(out, winner[j])
			j++
		default:
			out = append(out, winner[j])
			i++
			j++
		}
	}
	out = append(out, older[i:]...)
	return append(out, winner[j:]...)
}

// CandleBlockStart is the start of the period of the block a candle of tf
// that opened at t belongs to: a UTC day for 1m and 5m candles (1,440 and
// 288 a block), a month for 15m to 1d (2,976 to 31), a year for 1w (53).
// A block holds enough candles that its row and index entries cost a few
// bytes a candle or less, and few enough that a read of the newest 1,000
// candles decodes at most a few thousand.
func CandleBlockStart(tf domain.Timeframe, t time.Time) time.Time {
	t = t.UTC()
	switch tf {
	case domain.TF1m, domain.TF5m:
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	case domain.TF1w:
		return time.Date(t.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
	default:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
}
