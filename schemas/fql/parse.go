package fql

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxLength is the longest expression Compile accepts, in bytes.
const MaxLength = 4096

// maxDepth bounds the nesting of parentheses, `!` and function calls.
const maxDepth = 64

// Error is a syntax error of an expression: the 1-based column (in characters) where it is,
// and what was expected there.
type Error struct {
	Column int
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("column %d: %s", e.Column, e.Msg) }

type tokKind uint8

const (
	tEOF tokKind = iota
	tPath
	tString
	tNumber
	tOp     // = != < <= > >= !
	tLParen // (
	tRParen // )
	tLBrack // [
	tRBrack // ]
	tComma
)

type token struct {
	kind tokKind
	text string   // the operator, or the source text
	str  string   // a string literal's value
	num  float64  // a number's value
	path []string // a path's segments, unescaped
	col  int      // 1-based column of its first character
	off  int      // byte offset of its first character
}

// lexer splits src into tokens.
type lexer struct {
	src string
	off int
}

func (l *lexer) column(off int) int { return utf8.RuneCountInString(l.src[:off]) + 1 }

func (l *lexer) errAt(off int, format string, args ...any) *Error {
	return &Error{Column: l.column(off), Msg: fmt.Sprintf(format, args...)}
}

func isIdentByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func (l *lexer) next() (token, error) {
	for l.off < len(l.src) && strings.IndexByte(" \t\r\n", l.src[l.off]) >= 0 {
		l.off++
	}
	start := l.off
	t := token{off: start, col: l.column(start)}
	if l.off >= len(l.src) {
		t.kind = tEOF
		return t, nil
	}
	c := l.src[l.off]
	switch {
	case c == '(' || c == ')' || c == '[' || c == ']' || c == ',':
		l.off++
		t.kind = map[byte]tokKind{'(': tLParen, ')': tRParen, '[': tLBrack, ']': tRBrack, ',': tComma}[c]
		t.text = string(c)
		return t, nil
	case c == '=':
		l.off++
		if l.off < len(l.src) && l.src[l.off] == '=' { // "==" is taken as "=", as many write it
			l.off++
		}
		t.kind, t.text = tOp, "="
		return t, nil
	case c == '!' || c == '<' || c == '>':
		l.off++
		t.kind, t.text = tOp, string(c)
		if l.off < len(l.src) && l.src[l.off] == '=' {
			l.off++
			t.text += "="
		}
		return t, nil
	case c == '\'' || c == '"':
		return l.str(t, c)
	case c >= '0' && c <= '9' || c == '-' && l.off+1 < len(l.src) && l.src[l.off+1] >= '0' && l.src[l.off+1] <= '9':
		return l.number(t)
	case isIdentByte(c) || c == '\\':
		return l.path(t)
	}
	r, _ := utf8.DecodeRuneInString(l.src[l.off:])
	return t, l.errAt(start, "unexpected character %q: expected a field, a value, an operator or a parenthesis", r)
}

func (l *lexer) str(t token, quote byte) (token, error) {
	var b strings.Builder
	l.off++
	for l.off < len(l.src) {
		c := l.src[l.off]
		switch {
		case c == quote:
			l.off++
			t.kind, t.str, t.text = tString, b.String(), l.src[t.off:l.off]
			return t, nil
		case c == '\\' && l.off+1 < len(l.src):
			b.WriteByte(l.src[l.off+1])
			l.off += 2
		default:
			b.WriteByte(c)
			l.off++
		}
	}
	return t, l.errAt(t.off, "unterminated string: expected a closing %c", quote)
}

func (l *lexer) number(t token) (token, error) {
	end := l.off
	if l.src[end] == '-' {
		end++
	}
	for end < len(l.src) && (l.src[end] >= '0' && l.src[end] <= '9' || l.src[end] == '.' ||
		l.src[end] == 'e' || l.src[end] == 'E' || (l.src[end] == '+' || l.src[end] == '-') && (l.src[end-1] == 'e' || l.src[end-1] == 'E')) {
		end++
	}
	if end < len(l.src) && (isIdentByte(l.src[end]) || l.src[end] == '\\') && l.src[l.off] != '-' {
		return l.path(t) // a field whose name starts with a digit
	}
	f, err := strconv.ParseFloat(l.src[l.off:end], 64)
	if err != nil || f != f || f > 1.7976931348623157e308 || f < -1.7976931348623157e308 {
		return t, l.errAt(t.off, "invalid number %q", l.src[l.off:end])
	}
	l.off = end
	t.kind, t.num, t.text = tNumber, f, l.src[t.off:end]
	return t, nil
}

// path reads a dot-separated field path; `\x` takes any character x into a segment.
func (l *lexer) path(t token) (token, error) {
	var seg strings.Builder
	for {
		segStart := l.off
		for l.off < len(l.src) {
			c := l.src[l.off]
			if c == '\\' {
				if l.off+1 >= len(l.src) {
					return t, l.errAt(l.off, "expected a character after '\\'")
				}
				_, size := utf8.DecodeRuneInString(l.src[l.off+1:])
				seg.WriteString(l.src[l.off+1 : l.off+1+size])
				l.off += 1 + size
				continue
			}
			if !isIdentByte(c) {
				break
			}
			seg.WriteByte(c)
			l.off++
		}
		if l.off == segStart {
			return t, l.errAt(l.off, "expected a field name after '.'")
		}
		t.path = append(t.path, seg.String())
		seg.Reset()
		if l.off >= len(l.src) || l.src[l.off] != '.' {
			break
		}
		l.off++
	}
	t.kind, t.text = tPath, l.src[t.off:l.off]
	return t, nil
}

// parser is a recursive-descent parser over the lexer's tokens, one token of look-ahead.
type parser struct {
	lex   lexer
	tok   token
	depth int
}

// Compile parses src. Its error is an *Error naming the column and what was expected.
func Compile(src string) (*Expr, error) {
	if len(src) > MaxLength {
		return nil, &Error{Column: 1, Msg: fmt.Sprintf("the expression is %d bytes long: at most %d are allowed", len(src), MaxLength)}
	}
	if !utf8.ValidString(src) {
		return nil, &Error{Column: 1, Msg: "the expression is not valid UTF-8"}
	}
	p := &parser{lex: lexer{src: src}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tEOF {
		return nil, p.errf("expected an expression, got nothing")
	}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.errf("expected 'and', 'or' or the end, got %s", p.describe())
	}
	return &Expr{src: src, root: n}, nil
}

func (p *parser) advance() error {
	t, err := p.lex.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) errf(format string, args ...any) *Error {
	return &Error{Column: p.tok.col, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) describe() string {
	if p.tok.kind == tEOF {
		return "the end"
	}
	return strconv.Quote(p.tok.text)
}

func (p *parser) keyword(word string) bool {
	return p.tok.kind == tPath && len(p.tok.path) == 1 && p.tok.text == word
}

func (p *parser) or() (node, error) {
	l, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.keyword("or") {
		if err := p.advance(); err != nil {
			return nil, err
		}
		r, err := p.and()
		if err != nil {
			return nil, err
		}
		l = &orNode{l, r}
	}
	return l, nil
}

func (p *parser) and() (node, error) {
	l, err := p.comparison()
	if err != nil {
		return nil, err
	}
	for p.keyword("and") {
		if err := p.advance(); err != nil {
			return nil, err
		}
		r, err := p.comparison()
		if err != nil {
			return nil, err
		}
		l = &andNode{l, r}
	}
	return l, nil
}

func (p *parser) comparison() (node, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	var op cmpOp
	switch {
	case p.tok.kind == tOp && p.tok.text != "!":
		op = cmpOps[p.tok.text]
	case p.keyword("in"):
		op = opIn
	default:
		return l, nil
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	r, err := p.unary()
	if err != nil {
		return nil, err
	}
	return specialize(&cmpNode{op: op, l: l, r: r}), nil
}

func (p *parser) unary() (node, error) {
	if p.tok.kind == tOp && p.tok.text == "!" {
		if p.depth++; p.depth > maxDepth {
			return nil, p.errf("nested more than %d levels deep", maxDepth)
		}
		defer func() { p.depth-- }()
		if err := p.advance(); err != nil {
			return nil, err
		}
		n, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &notNode{n}, nil
	}
	return p.primary()
}

func (p *parser) primary() (node, error) {
	t := p.tok
	switch t.kind {
	case tString:
		return &litNode{v: strValue([]byte(t.str))}, p.advance()
	case tNumber:
		return &litNode{v: value{k: kNumber, n: t.num}}, p.advance()
	case tLParen:
		if p.depth++; p.depth > maxDepth {
			return nil, p.errf("nested more than %d levels deep", maxDepth)
		}
		defer func() { p.depth-- }()
		if err := p.advance(); err != nil {
			return nil, err
		}
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			return nil, p.errf("expected ')' to close the '(' at column %d, got %s", t.col, p.describe())
		}
		return n, p.advance()
	case tLBrack:
		return p.list()
	case tPath:
		if len(t.path) == 1 && t.text == t.path[0] {
			switch t.text {
			case "null":
				return &litNode{v: value{k: kNull}}, p.advance()
			case "true", "false":
				return &litNode{v: value{k: kBool, b: t.text == "true"}}, p.advance()
			case "and", "or", "in":
				return nil, p.errf("expected a field or a value, got %q", t.text)
			}
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind == tLParen && len(t.path) == 1 && t.text == t.path[0] {
			return p.call(t)
		}
		return &fieldNode{path: intern(t.path)}, nil
	}
	return nil, p.errf("expected a field, a value, '(' or '!', got %s", p.describe())
}

// list parses a list literal of values: ['a', 1, true, null].
func (p *parser) list() (node, error) {
	open := p.tok
	if err := p.advance(); err != nil {
		return nil, err
	}
	var vs []value
	for p.tok.kind != tRBrack {
		if len(vs) > 0 {
			if p.tok.kind != tComma {
				return nil, p.errf("expected ',' or ']' to close the '[' at column %d, got %s", open.col, p.describe())
			}
			if err := p.advance(); err != nil {
				return nil, err
			}
		}
		n, err := p.primary()
		if err != nil {
			return nil, err
		}
		lit, ok := n.(*litNode)
		if !ok || lit.v.k == kList {
			return nil, &Error{Column: p.lastCol(), Msg: "expected a string, a number, true, false or null in a list"}
		}
		vs = append(vs, lit.v)
	}
	return &litNode{v: value{k: kList, lits: vs}}, p.advance()
}

// lastCol is the column of the token before the current one, approximately: the current one's.
func (p *parser) lastCol() int { return p.tok.col }

// call parses fn(args) with p.tok at '('.
func (p *parser) call(name token) (node, error) {
	f, ok := funcs[name.text]
	if !ok {
		return nil, &Error{Column: name.col, Msg: fmt.Sprintf("unknown function %q: expected contains, match, length, lowercase or typeof", name.text)}
	}
	if p.depth++; p.depth > maxDepth {
		return nil, p.errf("nested more than %d levels deep", maxDepth)
	}
	defer func() { p.depth-- }()
	open := p.tok
	if err := p.advance(); err != nil {
		return nil, err
	}
	var args []node
	for p.tok.kind != tRParen {
		if len(args) > 0 {
			if p.tok.kind != tComma {
				return nil, p.errf("expected ',' or ')' to close the '(' at column %d, got %s", open.col, p.describe())
			}
			if err := p.advance(); err != nil {
				return nil, err
			}
		}
		a, err := p.or()
		if err != nil {
			return nil, err
		}
		args = append(args, a)
	}
	if len(args) != f.arity {
		return nil, p.errf("%s takes %d argument%s, got %d", name.text, f.arity, map[bool]string{true: "s"}[f.arity > 1], len(args))
	}
	n := &callNode{fn: f.fn, args: args}
	if f.fn == fnMatch {
		if lit, ok := args[1].(*litNode); ok && lit.v.k == kString {
			if err := checkGlob(lit.v.s); err != nil {
				return nil, &Error{Column: p.tok.col, Msg: "match: " + err.Error()}
			}
		}
	}
	return n, p.advance()
}
