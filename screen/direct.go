package screen

import (
	"math"
	"strings"
	"unicode/utf8"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// The direct evaluator: a checked expression of the common shape
// (variables, literals, logic, comparisons, arithmetic, `in` a literal
// list, and a few string functions) translated into Go closures over an
// Asset's typed fields, with CEL's semantics as cel-go v0.31 implements
// them. It allocates nothing and costs a few nanoseconds a node, where
// cel-go boxes every value it reads. An expression it cannot translate
// runs on cel-go alone; TestDirectEqualsCEL holds the two to the same
// answers over random expressions and assets.

// kind is the type of a dval.
type kind uint8

const (
	kErr kind = iota // an evaluation error, or an absent value (a style the asset was not scored in)
	kNull
	kBool
	kInt
	kDouble
	kString
	// kOversize: a string longer than the cost estimate assumed was read;
	// the evaluation is handed to cel-go with its cost tracker.
	kOversize
)

// dval is a value of the direct evaluator.
type dval struct {
	k kind
	b bool
	i int64
	d float64
	s string
}

var (
	dErr   = dval{k: kErr}
	dNull  = dval{k: kNull}
	dTrue  = dval{k: kBool, b: true}
	dFalse = dval{k: kBool}
)

func dBool(b bool) dval       { return dval{k: kBool, b: b} }
func dInt(i int64) dval       { return dval{k: kInt, i: i} }
func dDouble(d float64) dval  { return dval{k: kDouble, d: d} }
func dString(s string) dval   { return dval{k: kString, s: s} }
func (v dval) failed() bool   { return v.k == kErr || v.k == kOversize }
func (v dval) isNumber() bool { return v.k == kInt || v.k == kDouble }

// ref is v as cel-go's value (for the cel-go path's activation); an
// error is nil (the name does not resolve).
func (v dval) ref() ref.Val {
	switch v.k {
	case kNull:
		return types.NullValue
	case kBool:
		return types.Bool(v.b)
	case kInt:
		return types.Int(v.i)
	case kDouble:
		return types.Double(v.d)
	case kString:
		return types.String(v.s)
	}
	return nil
}

// dnode evaluates one node over an asset.
type dnode func(a row) dval

// row is the asset a node evaluates: read from its fields, or at index i
// of a Table's columns (cols, by the program's variable slot).
type row struct {
	a    *Asset
	i    int
	cols *[]*column
}

// direct is a program's direct form; nil when the expression has a node
// it does not translate.
type direct struct {
	root dnode
}

// match is the condition over a: ok is false when the evaluation must be
// made by cel-go (a string over the estimate's size was read).
func (d *direct) match(r row) (matched, ok bool) {
	v := d.root(r)
	if v.k == kOversize {
		return false, false
	}
	return v.k == kBool && v.b, true
}

// translate builds the direct form of a checked AST, one asset at a time
// and over a table; nil when a node is outside what it translates.
func translate(ast *celast.AST, p *Program, lits map[int64]ref.Val) (*direct, vnode) {
	t := translator{refs: ast.ReferenceMap(), p: p, lits: lits}
	root := t.node(ast.Expr())
	if root == nil {
		return nil, nil
	}
	return &direct{root: root}, t.vnode(ast.Expr())
}

type translator struct {
	refs map[int64]*celast.ReferenceInfo
	p    *Program
	// lits replaces the values of literals by their expression id: a
	// shape's template translated for an expression of the same shape
	// (shapes.go).
	lits map[int64]ref.Val
}

// lit is the value of literal e.
func (t *translator) lit(e celast.Expr) ref.Val {
	if v, ok := t.lits[e.ID()]; ok {
		return v
	}
	return e.AsLiteral()
}

func (t *translator) node(e celast.Expr) dnode {
	switch e.Kind() {
	case celast.LiteralKind:
		v, ok := literal(t.lit(e))
		if !ok {
			return nil
		}
		return func(row) dval { return v }
	case celast.IdentKind:
		return t.variable(e)
	case celast.CallKind:
		return t.call(e)
	}
	return nil
}

// literal is a constant's dval; false for the types it does not handle
// (uint, bytes, ...).
func literal(v ref.Val) (dval, bool) {
	switch v := v.(type) {
	case types.Null:
		return dNull, true
	case types.Bool:
		return dBool(bool(v)), true
	case types.Int:
		return dInt(int64(v)), true
	case types.Double:
		return dDouble(float64(v)), true
	case types.String:
		return dString(string(v)), true
	}
	return dval{}, false
}

// reader is the program's reader of the variable e names; false when e
// is not one of the market's variables (a type name, a constant).
func (t *translator) reader(e celast.Expr) (reader, bool) {
	r, ok := t.refs[e.ID()]
	if !ok || len(r.OverloadIDs) > 0 || r.Value != nil {
		return reader{}, false
	}
	rd, ok := t.p.reads[r.Name]
	return rd, ok
}

func (t *translator) variable(e celast.Expr) dnode {
	rd, ok := t.reader(e)
	if !ok {
		return nil
	}
	load, st, slot := rd.v.load, rd.style, rd.slot
	text := rd.v.text()
	return func(r row) dval {
		if r.cols != nil {
			return (*r.cols)[slot].at(r.i)
		}
		if st >= 0 && r.a.reports[st] == nil {
			return dErr
		}
		v := load(r.a, st)
		if text {
			return bounded(v)
		}
		return v
	}
}

// bounded hands over v unless it is a string longer than the cost
// estimate assumed.
func bounded(v dval) dval {
	if v.k == kString && len(v.s) > maxStringSize {
		return dval{k: kOversize}
	}
	return v
}

func (t *translator) call(e celast.Expr) dnode {
	c := e.AsCall()
	if r, ok := t.refs[e.ID()]; ok && r.Value != nil {
		return nil
	}
	args := c.Args()
	if c.IsMemberFunction() {
		recv := t.node(c.Target())
		if recv == nil || len(args) != 1 {
			return nil
		}
		arg := t.node(args[0])
		if arg == nil {
			return nil
		}
		var f func(s, x string) bool
		switch c.FunctionName() {
		case "contains":
			f = strings.Contains
		case "startsWith":
			f = strings.HasPrefix
		case "endsWith":
			f = strings.HasSuffix
		default:
			return nil
		}
		return func(a row) dval {
			s, x := recv(a), arg(a)
			if f, failed := strict(s, x); failed {
				return f
			}
			if s.k != kString || x.k != kString {
				return dErr
			}
			return dBool(f(s.s, x.s))
		}
	}
	fn := c.FunctionName()
	if fn == operators.In {
		return t.in(args)
	}
	nodes := make([]dnode, len(args))
	for i, a := range args {
		if nodes[i] = t.node(a); nodes[i] == nil {
			return nil
		}
	}
	switch fn {
	case operators.LogicalAnd:
		return logical(nodes, false)
	case operators.LogicalOr:
		return logical(nodes, true)
	case operators.Conditional:
		cond, yes, no := nodes[0], nodes[1], nodes[2]
		return func(a row) dval {
			c := cond(a)
			if c.failed() {
				return c
			}
			if c.k != kBool {
				return dErr
			}
			if c.b {
				return yes(a)
			}
			return no(a)
		}
	case operators.LogicalNot:
		x := nodes[0]
		return func(a row) dval {
			v := x(a)
			if v.failed() {
				return v
			}
			if v.k != kBool {
				return dErr
			}
			return dBool(!v.b)
		}
	case operators.Negate:
		x := nodes[0]
		return func(a row) dval {
			v := x(a)
			switch v.k {
			case kInt:
				if v.i == math.MinInt64 {
					return dErr
				}
				return dInt(-v.i)
			case kDouble:
				return dDouble(-v.d)
			case kOversize:
				return v
			}
			return dErr
		}
	case "size":
		if len(nodes) != 1 {
			return nil
		}
		x := nodes[0]
		return func(a row) dval {
			v := x(a)
			if v.failed() {
				return v
			}
			if v.k != kString {
				return dErr
			}
			return dInt(int64(utf8.RuneCountInString(v.s)))
		}
	case operators.Equals, operators.NotEquals, operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals:
		op := comparisons[fn]
		l, r := nodes[0], nodes[1]
		if op == opEq || op == opNe {
			// cel-go's evalEq and evalNe read the right side only when
			// the left one did not fail.
			return func(a row) dval {
				x := l(a)
				if x.failed() {
					return x
				}
				return compareOp(op, x, r(a))
			}
		}
		return func(a row) dval { return compareOp(op, l(a), r(a)) }
	case operators.Add, operators.Subtract, operators.Multiply, operators.Divide, operators.Modulo:
		return arithmetic(fn, nodes[0], nodes[1])
	}
	return nil
}

// A comparison operator.
type cmpOp uint8

const (
	opEq cmpOp = iota
	opNe
	opLt
	opLe
	opGt
	opGe
)

var comparisons = map[string]cmpOp{
	operators.Equals: opEq, operators.NotEquals: opNe,
	operators.Less: opLt, operators.LessEquals: opLe, operators.Greater: opGt, operators.GreaterEquals: opGe,
}

// compareOp is x op y with both sides evaluated (a failed side is the
// answer; for == and != the left one first).
func compareOp(op cmpOp, x, y dval) dval {
	if op == opEq || op == opNe {
		if x.failed() {
			return x
		}
		if y.failed() {
			return y
		}
		return dBool(equal(x, y) != (op == opNe))
	}
	if f, failed := strict(x, y); failed {
		return f
	}
	// The standard library's binding: the left side must be ordered (no
	// null), then NaN on either side is false.
	if x.k == kNull {
		return dErr
	}
	if isNaN(x) || isNaN(y) {
		return dFalse
	}
	c, valid := compare(x, y)
	if !valid {
		return dErr
	}
	switch op {
	case opLt:
		return dBool(c < 0)
	case opLe:
		return dBool(c <= 0)
	case opGt:
		return dBool(c > 0)
	}
	return dBool(c >= 0)
}

// strict is the failure of a strict binary call (cel-go's evalBinary
// evaluates both arguments, then returns the first failed one); an
// oversize read comes first, as it sends the whole evaluation to cel-go.
func strict(x, y dval) (dval, bool) {
	switch {
	case x.k == kOversize || y.k == kOversize:
		return dval{k: kOversize}, true
	case x.k == kErr:
		return x, true
	case y.k == kErr:
		return y, true
	}
	return dval{}, false
}

// logical is && (or ||, when or): the first term that decides wins, in
// order; otherwise an error among the terms is the answer (cel-go's
// evalAnd and evalOr).
func logical(terms []dnode, or bool) dnode {
	return func(a row) dval {
		failed := false
		var fail dval
		for _, t := range terms {
			v := t(a)
			if v.k == kBool {
				if v.b == or {
					return v
				}
				continue
			}
			if v.k == kOversize {
				return v
			}
			if !failed {
				failed, fail = true, dErr
			}
		}
		if failed {
			return fail
		}
		return dBool(!or)
	}
}

// equal is CEL's heterogeneous equality (types.Equal): numbers compare by
// value across int and double, NaN equals nothing, null equals only null,
// other kinds only their own.
func equal(x, y dval) bool {
	if x.k == kNull || y.k == kNull {
		return x.k == y.k
	}
	switch {
	case x.k == kDouble && math.IsNaN(x.d), y.k == kDouble && math.IsNaN(y.d):
		return false
	case x.isNumber() && y.isNumber():
		c, _ := compare(x, y)
		return c == 0
	case x.k != y.k:
		return false
	case x.k == kString:
		return x.s == y.s
	case x.k == kBool:
		return x.b == y.b
	}
	return false
}

func isNaN(v dval) bool { return v.k == kDouble && math.IsNaN(v.d) }

// compare is CEL's ordering (the Compare methods of types.Int, Double,
// String and Bool); false when the pair has none (null, mixed kinds, NaN).
func compare(x, y dval) (int, bool) {
	switch x.k {
	case kInt:
		switch y.k {
		case kInt:
			return cmp3(x.i < y.i, x.i > y.i), true
		case kDouble:
			if math.IsNaN(y.d) {
				return 0, false
			}
			return -compareDoubleInt(y.d, x.i), true
		}
	case kDouble:
		if math.IsNaN(x.d) {
			return 0, false
		}
		switch y.k {
		case kDouble:
			if math.IsNaN(y.d) {
				return 0, false
			}
			return cmp3(x.d < y.d, x.d > y.d), true
		case kInt:
			return compareDoubleInt(x.d, y.i), true
		}
	case kString:
		if y.k == kString {
			return strings.Compare(x.s, y.s), true
		}
	case kBool:
		if y.k == kBool {
			return cmp3(!x.b && y.b, x.b && !y.b), true
		}
	}
	return 0, false
}

func cmp3(less, more bool) int {
	if less {
		return -1
	}
	if more {
		return 1
	}
	return 0
}

// compareDoubleInt is cel-go's: out-of-range doubles order outside every
// int; otherwise the int is compared as a double.
func compareDoubleInt(d float64, i int64) int {
	if d < math.MinInt64 {
		return -1
	}
	if d > math.MaxInt64 {
		return 1
	}
	f := float64(i)
	return cmp3(d < f, d > f)
}

// arithmetic is + - * / % over two ints (checked for overflow, division
// and modulus by zero) or two doubles (IEEE 754); mixed or other kinds
// are an error, as cel-go has no such overload.
func arithmetic(fn string, l, r dnode) dnode {
	return func(a row) dval {
		x, y := l(a), r(a)
		if f, failed := strict(x, y); failed {
			return f
		}
		switch {
		case x.k == kInt && y.k == kInt:
			return intOp(fn, x.i, y.i)
		case x.k == kDouble && y.k == kDouble:
			switch fn {
			case operators.Add:
				return dDouble(x.d + y.d)
			case operators.Subtract:
				return dDouble(x.d - y.d)
			case operators.Multiply:
				return dDouble(x.d * y.d)
			case operators.Divide:
				return dDouble(x.d / y.d)
			}
		}
		return dErr
	}
}

// intOp is cel-go's checked int64 arithmetic (common/types/overflow.go).
func intOp(fn string, x, y int64) dval {
	switch fn {
	case operators.Add:
		if (y > 0 && x > math.MaxInt64-y) || (y < 0 && x < math.MinInt64-y) {
			return dErr
		}
		return dInt(x + y)
	case operators.Subtract:
		if (y < 0 && x > math.MaxInt64+y) || (y > 0 && x < math.MinInt64+y) {
			return dErr
		}
		return dInt(x - y)
	case operators.Multiply:
		if (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64) ||
			(x > 0 && y > 0 && x > math.MaxInt64/y) ||
			(x > 0 && y < 0 && y < math.MinInt64/x) ||
			(x < 0 && y > 0 && x < math.MinInt64/y) ||
			(x < 0 && y < 0 && y < math.MaxInt64/x) {
			return dErr
		}
		return dInt(x * y)
	case operators.Divide, operators.Modulo:
		if y == 0 || (x == math.MinInt64 && y == -1) {
			return dErr
		}
		if fn == operators.Divide {
			return dInt(x / y)
		}
		return dInt(x % y)
	}
	return dErr
}

// in is `x in [literals]`. cel-go's optimiser (OptOptimize) turns it into
// a set of the elements, each number also under its lossless conversions
// (decorators.go, maybeOptimizeSetMembership); an empty list is false
// without evaluating x. The set is built here by the same rule.
func (t *translator) in(args []celast.Expr) dnode {
	if len(args) != 2 || args[1].Kind() != celast.ListKind {
		return nil
	}
	list := args[1].AsList()
	if len(list.OptionalIndices()) > 0 {
		return nil
	}
	if list.Size() == 0 {
		return func(row) dval { return dFalse }
	}
	x := t.node(args[0])
	if x == nil {
		return nil
	}
	set := struct {
		ints    map[int64]bool
		doubles map[float64]bool
		strs    map[string]bool
		bools   [2]bool
		null    bool
	}{ints: map[int64]bool{}, doubles: map[float64]bool{}, strs: map[string]bool{}}
	add := func(v ref.Val) bool {
		switch v := v.(type) {
		case types.Int:
			set.ints[int64(v)] = true
		case types.Double:
			set.doubles[float64(v)] = true
		case types.Uint:
		case types.String:
			set.strs[string(v)] = true
		case types.Bool:
			set.bools[b2i(bool(v))] = true
		case types.Null:
			set.null = true
		default:
			return false
		}
		return true
	}
	for _, el := range list.Elements() {
		if el.Kind() != celast.LiteralKind {
			return nil
		}
		elem := t.lit(el)
		if !add(elem) {
			return nil
		}
		switch ev := elem.(type) {
		case types.Double:
			if iv := ev.ConvertToType(types.IntType); !types.IsError(iv) && iv.Equal(ev) == types.True {
				add(iv)
			}
		case types.Int:
			if dv := ev.ConvertToType(types.DoubleType); !types.IsError(dv) {
				add(dv)
			}
		}
	}
	return func(a row) dval {
		v := x(a)
		switch v.k {
		case kInt:
			return dBool(set.ints[v.i])
		case kDouble:
			return dBool(set.doubles[v.d])
		case kString:
			return dBool(set.strs[v.s])
		case kBool:
			return dBool(set.bools[b2i(v.b)])
		case kNull:
			return dBool(set.null)
		}
		return v
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

var _ interpreter.Activation = (*activation)(nil)
