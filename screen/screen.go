package screen

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	"github.com/marketscreener/market/domain"
	"github.com/marketscreener/market/domain/analytics"
)

// The limits of an expression. Compile refuses an expression longer than
// MaxLength bytes, nested deeper than MaxDepth, or whose estimated cost
// exceeds MaxCost; Eval stops an evaluation past MaxEvalCost. A cost unit
// is about one operation (CEL's cost model): a comparison of two
// variables costs 3, a regular expression match costs its text's length.
const (
	MaxLength   = 2048
	MaxDepth    = 32
	MaxCost     = 1000
	MaxEvalCost = MaxCost
	// maxStringSize bounds the strings the variables hold (symbols,
	// verdicts, factor readings), for the cost estimate.
	maxStringSize = 64
)

// The kinds of ExprError.
const (
	KindSyntax  = "syntax"
	KindType    = "type"
	KindTooLong = "too_long"
	KindTooDeep = "too_deep"
	KindCost    = "cost"
)

// ExprError is an expression refused, with where: Line and Column count
// from 1 (Column in characters), Offset from 0 (in characters); all three
// are 0 when the error concerns the whole expression.
type ExprError struct {
	Kind                 string
	Line, Column, Offset int
	Message              string
}

func (e *ExprError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s error: %s", e.Kind, e.Message)
	}
	return fmt.Sprintf("%s error at line %d, column %d: %s", e.Kind, e.Line, e.Column, e.Message)
}

// env is a market's compiler environment and its variables by name.
type env struct {
	cel    *cel.Env
	vars   []Variable
	byName map[string]*Variable
}

var envs = func() map[domain.Market]*env {
	out := make(map[domain.Market]*env, len(domain.Markets))
	for _, m := range domain.Markets {
		e, err := newEnv(m)
		if err != nil {
			panic(err)
		}
		out[m] = e
	}
	return out
}()

func newEnv(m domain.Market) (*env, error) {
	vars := marketVariables(m)
	opts := []cel.EnvOption{
		cel.CrossTypeNumericComparisons(true),
		cel.ParserRecursionLimit(MaxDepth),
		cel.ParserExpressionSizeLimit(MaxLength),
		cel.ASTValidators(cel.ValidateComprehensionNestingLimit(1)),
	}
	e := &env{vars: vars, byName: make(map[string]*Variable, len(vars))}
	for i := range vars {
		opts = append(opts, cel.Variable(vars[i].Name, vars[i].celType))
		e.byName[vars[i].Name] = &vars[i]
	}
	ce, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, fmt.Errorf("screen: environment of %s: %w", m, err)
	}
	e.cel = ce
	return e, nil
}

// Program is a compiled expression. It is safe for concurrent use.
type Program struct {
	market domain.Market
	style  analytics.Style
	expr   string
	env    *env
	// prg is cel-go's program, fast the same without the runtime cost
	// tracker, when the compile-time estimate already bounds the cost
	// within the limit (bounded): it serves every asset whose strings are
	// within the estimate's sizes (see match). A program with a direct
	// form plans them only when an asset needs them (planned).
	prg, fast cel.Program
	bounded   bool
	evalCost  uint64
	checked   *cel.Ast
	lazy      *lazyPlan
	// reads are the variables the expression names, by name.
	names []string
	reads map[string]reader
	// direct is the expression as Go closures, nil when it has a node
	// they do not cover (direct.go); it answers before prg and fast.
	direct *direct
	// vector is the direct form over a whole Table (vector.go).
	vector vnode
}

// reader reads one variable of an asset.
type reader struct {
	v     *Variable
	style int // index in analytics.Styles; -1 for an asset field
	slot  int // index in the program's names
}

// Compile compiles expr for the assets of market, the unprefixed report
// fields meaning analytics.DefaultStyle. A refused expression is an
// *ExprError; an unknown market is another error.
func Compile(market, expr string) (*Program, error) {
	return CompileStyle(market, analytics.DefaultStyle, expr)
}

// CompileStyle is Compile with the unprefixed report fields meaning
// style (in crypto; the other markets are scored in the default style
// whatever style says).
func CompileStyle(market string, style analytics.Style, expr string) (*Program, error) {
	return compile(market, style, expr, MaxEvalCost)
}

// compile is CompileStyle with the runtime cost limit evalCost.
func compile(market string, style analytics.Style, expr string, evalCost uint64) (*Program, error) {
	return compileWith(market, style, expr, evalCost, shapes)
}

// compileWith is compile with the shapes' templates of c (none when nil).
func compileWith(market string, style analytics.Style, expr string, evalCost uint64, c *shapeCache) (*Program, error) {
	m := domain.Market(market)
	e, ok := envs[m]
	if !ok {
		return nil, fmt.Errorf("screen: unknown market %q", market)
	}
	if m != domain.Crypto || style == "" {
		style = analytics.DefaultStyle
	}
	si := slices.Index(analytics.Styles, style)
	if si < 0 {
		return nil, fmt.Errorf("screen: unknown style %q", style)
	}
	if len(expr) > MaxLength {
		return nil, &ExprError{Kind: KindTooLong, Message: fmt.Sprintf("the expression is %d bytes long; at most %d are allowed", len(expr), MaxLength)}
	}
	if !utf8.ValidString(expr) {
		return nil, &ExprError{Kind: KindSyntax, Message: "the expression is not valid UTF-8"}
	}
	if strings.TrimSpace(expr) == "" {
		return nil, &ExprError{Kind: KindSyntax, Message: "the expression is empty"}
	}
	p := &Program{market: m, style: style, expr: expr, env: e, evalCost: evalCost, lazy: &lazyPlan{}}
	var shape string
	var lits []slotLit
	shaped := false
	if c != nil {
		shape, lits, shaped = shapeOf(expr)
	}
	var key string
	if shaped {
		key = string(m) + "\x00" + string(style) + "\x00" + strconv.FormatUint(evalCost, 10) + "\x00" + shape
		if t := c.get(key); t != nil && len(t.ids) == len(lits) {
			p.bounded = true
			t.instantiate(p, lits)
			return p, nil
		}
	}
	ast, err := p.check()
	if err != nil {
		return nil, err
	}
	est, err := e.cel.EstimateCost(ast, sizeEstimator{})
	if err != nil {
		return nil, &ExprError{Kind: KindCost, Message: err.Error()}
	}
	if est.Max > MaxCost {
		return nil, &ExprError{Kind: KindCost, Message: fmt.Sprintf("the expression's estimated cost is up to %d; at most %d is allowed", est.Max, MaxCost)}
	}
	// The estimate is an upper bound of the runtime cost for variables of
	// the sizes sizeEstimator gives: tracking the cost at run time (a call
	// per step) cannot stop such an evaluation.
	p.bounded = est.Max <= evalCost
	p.reads = map[string]reader{}
	for _, ref := range ast.NativeRep().ReferenceMap() {
		v, ok := e.byName[ref.Name]
		if !ok || len(ref.OverloadIDs) > 0 {
			continue
		}
		if _, seen := p.reads[v.Name]; seen {
			continue
		}
		p.reads[v.Name] = readerFor(v, style)
		p.names = append(p.names, v.Name)
	}
	slices.Sort(p.names)
	for i, n := range p.names {
		r := p.reads[n]
		r.slot = i
		p.reads[n] = r
	}
	if p.bounded {
		// Like fast, the direct form tracks no cost: it serves only where
		// the estimate bounds it.
		p.direct, p.vector = translate(ast.NativeRep(), p, nil)
	}
	if p.direct == nil {
		if err := p.plan(ast); err != nil {
			return nil, err
		}
		return p, nil
	}
	// cel-go serves a direct program only for an asset holding a string
	// over the estimate's sizes: it is planned when one first does.
	p.checked = ast
	if shaped {
		if t := newTemplate(p, ast.NativeRep(), expr, lits); t != nil {
			c.put(key, t)
		}
	}
	return p, nil
}

// check parses and type-checks the program's expression.
func (p *Program) check() (*cel.Ast, error) {
	ast, iss := p.env.cel.Parse(p.expr)
	if iss.Err() != nil {
		return nil, issueError(p.expr, iss, KindSyntax)
	}
	ast, iss = p.env.cel.Check(ast)
	if iss.Err() != nil {
		return nil, issueError(p.expr, iss, KindType)
	}
	if !ast.OutputType().IsExactType(types.BoolType) {
		return nil, &ExprError{Kind: KindType, Line: 1, Column: 1,
			Message: fmt.Sprintf("the expression must be a condition (bool); it is %s", ast.OutputType())}
	}
	return ast, nil
}

// plan builds cel-go's programs of the checked expression.
func (p *Program) plan(ast *cel.Ast) error {
	var err error
	if p.prg, err = p.env.cel.Program(ast, cel.CostLimit(p.evalCost), cel.EvalOptions(cel.OptOptimize)); err != nil {
		return &ExprError{Kind: KindType, Message: err.Error()}
	}
	if p.bounded {
		if p.fast, err = p.env.cel.Program(ast, cel.EvalOptions(cel.OptOptimize)); err != nil {
			return &ExprError{Kind: KindType, Message: err.Error()}
		}
	}
	return nil
}

// planned is plan for a direct program, once: from its checked AST, or
// its expression checked again (a program of a shape's template).
func (p *Program) planned() error {
	if p.direct == nil {
		return nil
	}
	p.lazy.once.Do(func() {
		ast := p.checked
		if ast == nil {
			if ast, p.lazy.err = p.check(); p.lazy.err != nil {
				return
			}
		}
		p.lazy.err = p.plan(ast)
	})
	return p.lazy.err
}

// lazyPlan is a direct program's planning by cel-go, once.
type lazyPlan struct {
	once sync.Once
	err  error
}

// issueError is the first of the issues as an ExprError of kind.
func issueError(expr string, iss *cel.Issues, kind string) error {
	errs := iss.Errors()
	if len(errs) == 0 {
		return &ExprError{Kind: kind, Message: iss.String()}
	}
	first := errs[0]
	msg := first.Message
	if strings.Contains(msg, "recursion") || strings.Contains(msg, "nesting") {
		kind = KindTooDeep
	}
	xe := &ExprError{Kind: kind, Message: msg}
	loc := first.Location
	if loc != nil && loc.Line() > 0 {
		xe.Line, xe.Column = loc.Line(), loc.Column()+1
		xe.Offset = offsetOf(expr, xe.Line, xe.Column)
	}
	return xe
}

// offsetOf is the character offset of line and column (from 1) in expr.
func offsetOf(expr string, line, column int) int {
	off := 0
	for l := 1; l < line; l++ {
		i := strings.IndexByte(expr, '\n')
		if i < 0 {
			break
		}
		off += utf8.RuneCountInString(expr[:i+1])
		expr = expr[i+1:]
	}
	return off + column - 1
}

// sizeEstimator bounds the strings of the variables for the cost estimate.
type sizeEstimator struct{}

func (sizeEstimator) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if len(n.Path()) > 0 {
		return &checker.SizeEstimate{Min: 0, Max: maxStringSize}
	}
	return nil
}

func (sizeEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// Market is the market the program was compiled for.
func (p *Program) Market() string { return string(p.market) }

// Style is the style of the program's unprefixed report fields.
func (p *Program) Style() analytics.Style { return p.style }

// String is the expression as written.
func (p *Program) String() string { return p.expr }

// Variables lists the variables the expression names, sorted.
func (p *Program) Variables() []string { return slices.Clone(p.names) }

// Eval evaluates the program over a (an asset of the program's market).
// matched is whether the condition holds; an evaluation that errors
// (null in an ordering, a report of a style the asset was not scored in,
// a division by zero) does not match, without an error. err is an
// *ExprError of kind "cost" when the evaluation went past MaxEvalCost.
// read holds the value of every variable the expression names: int64,
// float64, string, or nil for null and for a style the asset was not
// scored in.
func (p *Program) Eval(a *Asset) (matched bool, read map[string]any, err error) {
	matched, err = p.Match(a)
	return matched, p.Read(a), err
}

// Match is Eval without read, for the hot paths that do not need it.
func (p *Program) Match(a *Asset) (bool, error) {
	return p.match(&activation{p: p, a: a})
}

func (p *Program) match(act *activation) (bool, error) {
	if p.direct != nil {
		if matched, ok := p.direct.match(row{a: act.a}); ok {
			return matched, nil
		}
	}
	return p.matchCEL(act)
}

// matchCEL is match by cel-go alone.
func (p *Program) matchCEL(act *activation) (bool, error) {
	if err := p.planned(); err != nil {
		return false, err
	}
	var out ref.Val
	var err error
	if p.fast != nil {
		act.bounded, act.oversize = true, false
		out, _, err = p.fast.Eval(act)
		act.bounded = false
	}
	if p.fast == nil || act.oversize {
		// A string longer than the estimate assumed: the estimate does not
		// bound this asset's cost, so it is evaluated with the tracker.
		out, _, err = p.prg.Eval(act)
	}
	if err != nil {
		if isCostError(err) {
			return false, &ExprError{Kind: KindCost, Message: "the evaluation went past its cost limit"}
		}
		return false, nil
	}
	b, ok := out.(types.Bool)
	return ok && bool(b), nil
}

func isCostError(err error) bool {
	return strings.Contains(err.Error(), "cost limit exceeded")
}

// Read is the value of each variable the expression names.
func (p *Program) Read(a *Asset) map[string]any {
	read := make(map[string]any, len(p.names))
	for _, n := range p.names {
		read[n] = native(p.value(a, n))
	}
	return read
}

// Value is the value of variable name (one of the market's Variables,
// an unprefixed report field in the program's style) of a: int64,
// float64, string, or nil for null and for an unknown name.
func (p *Program) Value(a *Asset, name string) any {
	get, ok := p.Field(name)
	if !ok {
		return nil
	}
	return get(a)
}

// Field is the reader of variable name (one of the market's Variables,
// an unprefixed report field in the program's style), whether or not the
// expression reads it; false for a name the market does not have.
func (p *Program) Field(name string) (func(*Asset) any, bool) {
	v, ok := envs[p.market].byName[name]
	if !ok {
		return nil, false
	}
	r := readerFor(v, p.style)
	return func(a *Asset) any { return native(p.resolve(a, r)) }, true
}

// readerFor reads v, an unprefixed report field in style.
func readerFor(v *Variable, style analytics.Style) reader {
	r := reader{v: v, style: -1}
	if !v.AssetField {
		st := v.Style
		if st == "" {
			st = style
		}
		r.style = slices.Index(analytics.Styles, st)
	}
	return r
}

func (p *Program) value(a *Asset, name string) ref.Val {
	r, ok := p.reads[name]
	if !ok {
		return nil
	}
	return p.resolve(a, r)
}

func (p *Program) resolve(a *Asset, r reader) ref.Val {
	if r.style >= 0 && a.reports[r.style] == nil {
		return nil
	}
	return r.v.load(a, r.style).ref()
}

func native(v ref.Val) any {
	switch v := v.(type) {
	case nil, types.Null:
		return nil
	case types.Int:
		return int64(v)
	case types.Double:
		return float64(v)
	case types.String:
		return string(v)
	case types.Bool:
		return bool(v)
	}
	return v.Value()
}

// activation resolves the program's variables over one asset.
type activation struct {
	p *Program
	a *Asset
	// bounded: the evaluation relies on the cost estimate, so a string
	// longer than it assumed is not handed over: oversize is set and the
	// value is an error (the evaluation is then made again with the
	// cost tracker).
	bounded, oversize bool
}

func (x *activation) ResolveName(name string) (any, bool) {
	v := x.p.value(x.a, name)
	if v == nil {
		return nil, false
	}
	if s, ok := v.(types.String); ok && x.bounded && len(s) > maxStringSize {
		x.oversize = true
		return types.NewErr("screen: %s is longer than the cost estimate assumed", name), true
	}
	return v, true
}

func (x *activation) Parent() interpreter.Activation { return nil }

// IsExprError reports whether err is an *ExprError and returns it.
func IsExprError(err error) (*ExprError, bool) {
	var xe *ExprError
	ok := errors.As(err, &xe)
	return xe, ok
}
