package screen

import (
	"strconv"
	"strings"
	"sync"

	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// Expressions of one shape. Clients vary the numbers and the words of a
// screen far more often than its structure (`rsi < 30`, then `rsi < 28`),
// and a never-seen expression costs its parse, its type check, its cost
// estimate and cel-go's planning: most of a query. An expression's shape
// is its text with its plain literals (decimal numbers, and quoted
// strings of ASCII without escapes) taken out as slots. The first
// expression of a shape is compiled in full and kept as the shape's
// template, with the expression id of each slot's literal in its checked
// AST; a later expression of the same shape is the template's checked AST
// with the literals' values replaced, translated into the direct form
// without cel-go (it is planned by cel-go only if an asset ever needs
// the cel-go path).
//
// Two expressions of one shape check alike: the same tokens in the same
// order, the same literal types, and strings of the same length (the
// shape keeps their length, which the cost estimate reads). Only a shape
// whose template the direct form translates whole, within the cost
// estimate, is kept: the direct form's semantics do not depend on a
// literal's value, where cel-go's planning can (a regular expression is
// compiled as it is planned).

// slotLit is one plain literal of an expression.
type slotLit struct {
	off int // byte offset of its first character
	val ref.Val
}

// shapeOf is expr's shape and its literals; false when expr has
// something the scan does not read as the parser would (a comment, a
// raw or bytes string, an escape, a hex or unsigned number, a number
// out of range, a byte outside ASCII), which is then compiled in full.
func shapeOf(expr string) (string, []slotLit, bool) {
	var b strings.Builder
	b.Grow(len(expr))
	var lits []slotLit
	space := false
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c >= 0x80 || c == 0:
			// (A NUL would also forge a slot's mark in the shape.)
			return "", nil, false
		case isSpace(c):
			// A run of spaces is one: it only separates tokens.
			if !space {
				b.WriteByte(' ')
				space = true
			}
			i++
			continue
		case c == '/' && i+1 < len(expr) && expr[i+1] == '/':
			return "", nil, false
		case isIdentStart(c):
			j := i + 1
			for j < len(expr) && isWordChar(expr[j]) {
				j++
			}
			if j < len(expr) && (expr[j] == '"' || expr[j] == '\'') {
				return "", nil, false // r"..", b"..": raw or bytes
			}
			b.WriteString(expr[i:j])
			i = j
		case c >= '0' && c <= '9':
			j, v, ok := scanNumber(expr, i)
			if !ok {
				return "", nil, false
			}
			lits = append(lits, slotLit{off: i, val: v})
			if _, isInt := v.(types.Int); isInt {
				b.WriteString("\x00i")
			} else {
				b.WriteString("\x00d")
			}
			i = j
		case c == '.' && i+1 < len(expr) && expr[i+1] >= '0' && expr[i+1] <= '9':
			return "", nil, false // .5
		case c == '"' || c == '\'':
			if i+2 < len(expr) && expr[i+1] == c && expr[i+2] == c {
				return "", nil, false // triple-quoted
			}
			j := i + 1
			for j < len(expr) && expr[j] != c {
				if expr[j] == '\\' || expr[j] == '\n' || expr[j] == '\r' || expr[j] >= 0x80 {
					return "", nil, false
				}
				j++
			}
			if j == len(expr) {
				return "", nil, false
			}
			s := expr[i+1 : j]
			lits = append(lits, slotLit{off: i, val: types.String(s)})
			b.WriteString("\x00s")
			b.WriteString(strconv.Itoa(len(s)))
			b.WriteByte(0)
			i = j + 1
		default:
			b.WriteByte(c)
			i++
		}
		space = false
	}
	return b.String(), lits, true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isWordChar(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

// scanNumber reads a decimal number at i: digits, an optional fraction
// and an optional exponent (CEL's NUM_INT and NUM_FLOAT without hex or
// the unsigned suffix). It ends before j.
func scanNumber(expr string, i int) (j int, v ref.Val, ok bool) {
	digits := func(k int) int {
		for k < len(expr) && expr[k] >= '0' && expr[k] <= '9' {
			k++
		}
		return k
	}
	j = digits(i)
	isFloat := false
	if j+1 < len(expr) && expr[j] == '.' && expr[j+1] >= '0' && expr[j+1] <= '9' {
		j = digits(j + 1)
		isFloat = true
	}
	if j < len(expr) && (expr[j] == 'e' || expr[j] == 'E') {
		k := j + 1
		if k < len(expr) && (expr[k] == '+' || expr[k] == '-') {
			k++
		}
		if k == len(expr) || expr[k] < '0' || expr[k] > '9' {
			return 0, nil, false
		}
		j = digits(k)
		isFloat = true
	}
	if j < len(expr) && (isWordChar(expr[j]) || expr[j] == '.') {
		return 0, nil, false // 0x1F, 5u, 1.e3, 1.x
	}
	if isFloat {
		f, err := strconv.ParseFloat(expr[i:j], 64)
		if err != nil {
			return 0, nil, false
		}
		return j, types.Double(f), true
	}
	n, err := strconv.ParseInt(expr[i:j], 10, 64)
	if err != nil {
		return 0, nil, false
	}
	return j, types.Int(n), true
}

// template is a shape's first expression, compiled.
type template struct {
	ast   *celast.AST // checked
	ids   []int64     // the literal of each slot
	neg   []bool      // the literal is the slot's number negated (-5)
	reads map[string]reader
	names []string
}

// newTemplate is p (compiled in full from expr, its checked AST ast) as
// its shape's template; nil when a slot is not one literal of the AST.
func newTemplate(p *Program, ast *celast.AST, expr string, lits []slotLit) *template {
	byStart := map[int32][]int64{}
	for id, r := range ast.SourceInfo().OffsetRanges() {
		byStart[r.Start] = append(byStart[r.Start], id)
	}
	literals := map[int64]ref.Val{}
	celast.PostOrderVisit(ast.Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		if e.Kind() == celast.LiteralKind {
			literals[e.ID()] = e.AsLiteral()
		}
	}))
	t := &template{ast: ast, ids: make([]int64, len(lits)), neg: make([]bool, len(lits)), reads: p.reads, names: p.names}
	used := map[int64]bool{}
	find := func(start int, want ref.Val) (int64, bool) {
		for _, id := range byStart[int32(start)] {
			if v, ok := literals[id]; ok && !used[id] && v.Type() == want.Type() && v.Equal(want) == types.True {
				return id, true
			}
		}
		return 0, false
	}
	for i, l := range lits {
		if id, ok := find(l.off, l.val); ok {
			t.ids[i], used[id] = id, true
			continue
		}
		// -5: one literal from the minus sign, spaces between.
		neg := negate(l.val)
		k := l.off - 1
		for k >= 0 && isSpace(expr[k]) {
			k--
		}
		if neg == nil || k < 0 || expr[k] != '-' {
			return nil
		}
		id, ok := find(k, neg)
		if !ok {
			return nil
		}
		t.ids[i], t.neg[i], used[id] = id, true, true
	}
	return t
}

// negate is -v for a number, nil for anything else.
func negate(v ref.Val) ref.Val {
	switch v := v.(type) {
	case types.Int:
		return -v
	case types.Double:
		return -v
	}
	return nil
}

// instantiate is the program of expr, of the template's shape with lits.
func (t *template) instantiate(p *Program, lits []slotLit) {
	vals := make(map[int64]ref.Val, len(lits))
	for i, l := range lits {
		v := l.val
		if t.neg[i] {
			v = negate(v)
		}
		vals[t.ids[i]] = v
	}
	p.reads, p.names = t.reads, t.names
	p.direct, p.vector = translate(t.ast, p, vals)
}

// maxShapes bounds the templates kept; past it, the oldest is dropped.
const maxShapes = 4096

// shapeCache is the templates by market, style, cost limit and shape.
type shapeCache struct {
	mu    sync.Mutex
	byKey map[string]*template
	order []string
}

var shapes = newShapeCache()

func newShapeCache() *shapeCache { return &shapeCache{byKey: map[string]*template{}} }

func (c *shapeCache) get(key string) *template {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byKey[key]
}

func (c *shapeCache) put(key string, t *template) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[key]; ok {
		return
	}
	if len(c.order) >= maxShapes {
		delete(c.byKey, c.order[0])
		c.order = c.order[1:]
	}
	c.byKey[key] = t
	c.order = append(c.order, key)
}
