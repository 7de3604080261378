package screen

import (
	"math"
	"math/bits"
	"strings"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
)

// The direct form over a whole Table at once: the logic of an expression
// (&&, ||, !, a condition's ternary) combines one answer per asset, held
// as bit sets, and its leaves are evaluated in one loop each. A
// comparison of a variable with a literal (or two variables) reads their
// columns; any other condition is evaluated asset by asset with the
// direct form's closures. Every node is evaluated for every asset: with
// no side effects, the answers equal the short-circuit evaluation's,
// except that a string over the estimate's size read where cel-go would
// not have read it sends that asset to cel-go, which answers it alone.

// answers are a condition's answer per asset: t where true, e where an
// error, o where a string over the estimate's size was read (the asset
// is evaluated by cel-go); false elsewhere.
type answers struct {
	t, e, o []uint64
}

func newAnswers(n int) answers {
	w := (n + 63) / 64
	return answers{t: make([]uint64, w), e: make([]uint64, w), o: make([]uint64, w)}
}

func (r *answers) set(i int, v dval) {
	w, b := i/64, uint64(1)<<(i%64)
	switch {
	case v.k == kBool && v.b:
		r.t[w] |= b
	case v.k == kOversize:
		r.o[w] |= b
	case v.k != kBool:
		r.e[w] |= b
	}
}

// vctx is one evaluation over a table.
type vctx struct {
	n    int
	cols *[]*column
}

// vnode answers a condition for every asset of a table.
type vnode func(c *vctx) answers

// vtranslate is the vector form of a condition; nil when the direct form
// does not translate a node of it.
func (t *translator) vnode(e celast.Expr) vnode {
	if e.Kind() == celast.CallKind && !e.AsCall().IsMemberFunction() {
		if r, ok := t.refs[e.ID()]; !ok || r.Value == nil {
			args := e.AsCall().Args()
			switch fn := e.AsCall().FunctionName(); fn {
			case operators.LogicalAnd, operators.LogicalOr:
				terms := make([]vnode, len(args))
				for i, a := range args {
					if terms[i] = t.vnode(a); terms[i] == nil {
						return nil
					}
				}
				return vlogical(terms, fn == operators.LogicalOr)
			case operators.LogicalNot:
				x := t.vnode(args[0])
				if x == nil {
					return nil
				}
				return func(c *vctx) answers {
					r := x(c)
					for w := range r.t {
						r.t[w] = ^r.t[w] &^ r.e[w] &^ r.o[w]
					}
					clearTail(r.t, c.n)
					return r
				}
			case operators.Equals, operators.NotEquals, operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals:
				if l, r := t.operand(args[0]), t.operand(args[1]); l != nil && r != nil {
					return vcompare(comparisons[fn], l, r)
				}
			}
		}
	}
	d := t.node(e)
	if d == nil {
		return nil
	}
	return func(c *vctx) answers {
		r := newAnswers(c.n)
		for i := 0; i < c.n; i++ {
			r.set(i, d(row{i: i, cols: c.cols}))
		}
		return r
	}
}

// operand is a comparison's side read in a loop: a literal, or a
// variable's column; nil for anything else.
type operand struct {
	lit  dval
	slot int // -1 for a literal
}

func (t *translator) operand(e celast.Expr) *operand {
	switch e.Kind() {
	case celast.LiteralKind:
		v, ok := literal(t.lit(e))
		if !ok {
			return nil
		}
		return &operand{lit: v, slot: -1}
	case celast.IdentKind:
		if rd, ok := t.reader(e); ok {
			return &operand{slot: rd.slot}
		}
	}
	return nil
}

func vcompare(op cmpOp, l, r *operand) vnode {
	switch {
	case l.slot >= 0 && r.slot < 0:
		return func(c *vctx) answers { return compareLit(op, (*c.cols)[l.slot], r.lit, false, c.n) }
	case l.slot < 0 && r.slot >= 0:
		return func(c *vctx) answers { return compareLit(op, (*c.cols)[r.slot], l.lit, true, c.n) }
	}
	return func(c *vctx) answers {
		res := newAnswers(c.n)
		x, y := l.lit, r.lit
		var lc, rc *column
		if l.slot >= 0 {
			lc = (*c.cols)[l.slot]
		}
		if r.slot >= 0 {
			rc = (*c.cols)[r.slot]
		}
		for i := 0; i < c.n; i++ {
			if lc != nil {
				x = lc.at(i)
			}
			if rc != nil {
				y = rc.at(i)
			}
			res.set(i, compareOp(op, x, y))
		}
		return res
	}
}

// compareLit is col op lit (lit op col when litLeft) for each asset:
// strings and numbers are compared in the loop, any other pair (null,
// NaN, an error) by compareOp.
func compareLit(op cmpOp, col *column, lit dval, litLeft bool, n int) answers {
	res := newAnswers(n)
	eq := op == opEq || op == opNe
	litCode, inDict := uint64(0), false
	if lit.k == kString {
		litCode, inDict = col.code[lit.s]
	}
	for i := 0; i < n; i++ {
		var c int
		switch k := col.k[i]; {
		case k == kString && lit.k == kString:
			if eq {
				if (inDict && col.n[i] == litCode) != (op == opNe) {
					res.t[i/64] |= 1 << (i % 64)
				}
				continue
			}
			c = strings.Compare(col.dict[col.n[i]], lit.s)
		case k == kDouble && lit.k == kDouble:
			d := math.Float64frombits(col.n[i])
			if d != d || lit.d != lit.d {
				res.set(i, litCompare(op, col.at(i), lit, litLeft))
				continue
			}
			c = cmp3(d < lit.d, d > lit.d)
		case k == kDouble && lit.k == kInt:
			d := math.Float64frombits(col.n[i])
			if d != d {
				res.set(i, litCompare(op, col.at(i), lit, litLeft))
				continue
			}
			c = compareDoubleInt(d, lit.i)
		case k == kInt && lit.k == kInt:
			x := int64(col.n[i])
			c = cmp3(x < lit.i, x > lit.i)
		case k == kInt && lit.k == kDouble && lit.d == lit.d:
			c = -compareDoubleInt(lit.d, int64(col.n[i]))
		default:
			res.set(i, litCompare(op, col.at(i), lit, litLeft))
			continue
		}
		if litLeft {
			c = -c
		}
		if holds(op, c) {
			res.t[i/64] |= 1 << (i % 64)
		}
	}
	return res
}

func litCompare(op cmpOp, v, lit dval, litLeft bool) dval {
	if litLeft {
		return compareOp(op, lit, v)
	}
	return compareOp(op, v, lit)
}

// holds is whether op holds for an ordering c (-1, 0, 1).
func holds(op cmpOp, c int) bool {
	switch op {
	case opEq:
		return c == 0
	case opNe:
		return c != 0
	case opLt:
		return c < 0
	case opLe:
		return c <= 0
	case opGt:
		return c > 0
	}
	return c >= 0
}

// vlogical is && (|| when or) over every asset: a term that decides
// (false for &&, true for ||) is the answer, else an error among the
// terms; an oversize read in any term sends the asset to cel-go.
func vlogical(terms []vnode, or bool) vnode {
	return func(c *vctx) answers {
		out := newAnswers(c.n)
		decided := make([]uint64, len(out.t))
		for _, term := range terms {
			r := term(c)
			for w := range decided {
				if or {
					decided[w] |= r.t[w]
				} else {
					decided[w] |= ^r.t[w] &^ r.e[w] &^ r.o[w]
				}
				out.e[w] |= r.e[w]
				out.o[w] |= r.o[w]
			}
		}
		for w := range decided {
			if or {
				out.t[w] = decided[w]
			} else {
				out.t[w] = ^decided[w] &^ out.e[w]
			}
			out.e[w] &^= decided[w]
			out.t[w] &^= out.o[w]
			out.e[w] &^= out.o[w]
		}
		clearTail(out.t, c.n)
		return out
	}
}

// clearTail clears the bits past n.
func clearTail(b []uint64, n int) {
	if r := n % 64; r != 0 && len(b) > 0 {
		b[len(b)-1] &= (1 << r) - 1
	}
}

// MatchTable calls yield with the index of each asset of t in mask (a
// set as Table.Scored gives; nil for every asset) that matches, in
// order. Assets the direct form cannot answer (an expression it does not
// translate, a string over the estimate's size) are evaluated by cel-go;
// a cost error of one of them is the error.
func (p *Program) MatchTable(t *Table, mask []uint64, yield func(i int)) error {
	in := func(i int) bool { return mask == nil || mask[i/64]&(1<<(i%64)) != 0 }
	act := &activation{p: p}
	if p.vector == nil {
		for i, a := range t.assets {
			if !in(i) {
				continue
			}
			act.a = a
			ok, err := p.matchCEL(act)
			if err != nil {
				return err
			}
			if ok {
				yield(i)
			}
		}
		return nil
	}
	cols := make([]*column, len(p.names))
	for _, n := range p.names {
		r := p.reads[n]
		cols[r.slot] = t.column(r)
	}
	res := p.vector(&vctx{n: len(t.assets), cols: &cols})
	for w := range res.t {
		m := res.t[w] | res.o[w]
		if mask != nil {
			m &= mask[w]
		}
		for ; m != 0; m &= m - 1 {
			b := m & -m
			i := w*64 + bits.TrailingZeros64(m)
			if res.o[w]&b != 0 {
				act.a = t.assets[i]
				ok, err := p.matchCEL(act)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
			}
			yield(i)
		}
	}
	return nil
}
