package fql

import (
	"bytes"
	"strconv"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// Expr is a compiled expression. It is immutable: safe for concurrent use.
type Expr struct {
	src  string
	root node
}

// String returns the source text.
func (e *Expr) String() string { return e.src }

// Eval reports whether the expression is true for the message m. It does not allocate.
func (e *Expr) Eval(m *Message) bool {
	return e.root.test(m)
}

// Match is Eval on a message's raw JSON, for callers that evaluate one expression.
func (e *Expr) Match(raw []byte) bool {
	var m Message
	m.Reset(raw)
	return e.Eval(&m)
}

type kind uint8

const (
	kNull kind = iota // also a missing field
	kBool
	kNumber
	kString
	kList
	kObject
)

var kindNames = [...]string{kNull: "null", kBool: "bool", kNumber: "number", kString: "string", kList: "list", kObject: "object"}

// value is the result of evaluating a node. Strings are held as bytes: the text of a literal,
// or the raw content of a JSON string (between its quotes, escapes unresolved when esc);
// lower marks a lowercase() to apply when the string is read. A JSON list or object is its raw
// bytes; a list literal its values.
type value struct {
	k     kind
	b     bool
	esc   bool
	lower bool
	n     float64
	s     []byte
	lits  []value
}

func strValue(s []byte) value { return value{k: kString, s: s} }

// node is one node of a compiled expression. test is eval reduced to "is it true", which the
// boolean operators and Eval use: it spares building a value where only a bool is needed.
type node interface {
	eval(m *Message) value
	test(m *Message) bool
}

type litNode struct{ v value }

func (n *litNode) eval(*Message) value { return n.v }

func (n *litNode) test(*Message) bool { return n.v.k == kBool && n.v.b }

type fieldNode struct{ path *pathRef }

func (n *fieldNode) eval(m *Message) value { return m.lookupCached(n.path) }

func (n *fieldNode) test(m *Message) bool {
	raw, _ := m.rawAt(n.path)
	return len(raw) == 4 && string(raw) == "true"
}

type notNode struct{ x node }

func (n *notNode) eval(m *Message) value {
	switch v := n.x.eval(m); v.k {
	case kBool:
		return value{k: kBool, b: !v.b}
	case kNull: // a missing or null flag counts as false
		return value{k: kBool, b: true}
	}
	return value{k: kBool}
}

func (n *notNode) test(m *Message) bool { v := n.eval(m); return v.b }

type andNode struct{ l, r node }

func (n *andNode) eval(m *Message) value { return value{k: kBool, b: n.test(m)} }

func (n *andNode) test(m *Message) bool { return n.l.test(m) && n.r.test(m) }

type orNode struct{ l, r node }

func (n *orNode) eval(m *Message) value { return value{k: kBool, b: n.test(m)} }

func (n *orNode) test(m *Message) bool { return n.l.test(m) || n.r.test(m) }

type cmpOp uint8

const (
	opEq cmpOp = iota
	opNe
	opLt
	opLe
	opGt
	opGe
	opIn
)

var cmpOps = map[string]cmpOp{"=": opEq, "!=": opNe, "<": opLt, "<=": opLe, ">": opGt, ">=": opGe}

type cmpNode struct {
	op   cmpOp
	l, r node
}

func (n *cmpNode) eval(m *Message) value { return value{k: kBool, b: n.test(m)} }

func (n *cmpNode) test(m *Message) bool {
	l, r := n.l.eval(m), n.r.eval(m)
	switch n.op {
	case opEq:
		return equal(l, r)
	case opNe:
		return !equal(l, r)
	case opIn:
		if r.k != kList {
			return false
		}
		it := listIter{v: r}
		for e, ok := it.next(); ok; e, ok = it.next() {
			if equal(l, e) {
				return true
			}
		}
		return false
	}
	if l.k != kNumber || r.k != kNumber {
		return false
	}
	var b bool
	switch n.op {
	case opLt:
		b = l.n < r.n
	case opLe:
		b = l.n <= r.n
	case opGt:
		b = l.n > r.n
	case opGe:
		b = l.n >= r.n
	}
	return b
}

// equal is FQL's strict equality: same type and same value.
func equal(a, b value) bool {
	if a.k != b.k {
		return false
	}
	switch a.k {
	case kNull:
		return true
	case kBool:
		return a.b == b.b
	case kNumber:
		return a.n == b.n
	case kString:
		if !a.esc && !b.esc && !a.lower && !b.lower {
			return string(a.s) == string(b.s)
		}
		x, y := newRunes(a), newRunes(b)
		for {
			r1, ok1 := x.next()
			r2, ok2 := y.next()
			if ok1 != ok2 || r1 != r2 {
				return false
			}
			if !ok1 {
				return true
			}
		}
	case kList:
		x, y := listIter{v: a}, listIter{v: b}
		for {
			e1, ok1 := x.next()
			e2, ok2 := y.next()
			if ok1 != ok2 || ok1 && !equal(e1, e2) {
				return false
			}
			if !ok1 {
				return true
			}
		}
	}
	return false // objects are not compared
}

type fn uint8

const (
	fnContains fn = iota
	fnMatch
	fnLength
	fnLowercase
	fnTypeof
)

var funcs = map[string]struct {
	fn    fn
	arity int
}{
	"contains": {fnContains, 2}, "match": {fnMatch, 2}, "length": {fnLength, 1},
	"lowercase": {fnLowercase, 1}, "typeof": {fnTypeof, 1},
}

type callNode struct {
	fn   fn
	args []node
}

func (n *callNode) test(m *Message) bool { v := n.eval(m); return v.k == kBool && v.b }

func (n *callNode) eval(m *Message) value {
	a := n.args[0].eval(m)
	switch n.fn {
	case fnContains:
		b := n.args[1].eval(m)
		return value{k: kBool, b: a.k == kString && b.k == kString && contains(a, b)}
	case fnMatch:
		b := n.args[1].eval(m)
		return value{k: kBool, b: a.k == kString && b.k == kString && glob(newRunes(b), newRunes(a))}
	case fnLength:
		switch a.k {
		case kNull:
			return value{k: kNumber}
		case kString:
			c, it := 0, newRunes(a)
			if !a.esc && !a.lower {
				return value{k: kNumber, n: float64(len(a.s))}
			}
			for r, ok := it.next(); ok; r, ok = it.next() {
				c += utf8.RuneLen(r)
			}
			return value{k: kNumber, n: float64(c)}
		case kList:
			c, it := 0, listIter{v: a}
			for _, ok := it.next(); ok; _, ok = it.next() {
				c++
			}
			return value{k: kNumber, n: float64(c)}
		}
		return value{}
	case fnLowercase:
		if a.k != kString {
			return value{}
		}
		a.lower = true
		return a
	case fnTypeof:
		return strValue(typeNames[a.k])
	}
	return value{}
}

var typeNames = func() [len(kindNames)][]byte {
	var out [len(kindNames)][]byte
	for i, s := range kindNames {
		out[i] = []byte(s)
	}
	return out
}()

// contains reports whether the string a holds the string sub.
func contains(a, sub value) bool {
	s := newRunes(a)
	for {
		x, y := s, newRunes(sub)
		for {
			r2, ok2 := y.next()
			if !ok2 {
				return true
			}
			r1, ok1 := x.next()
			if !ok1 {
				return false
			}
			if r1 != r2 {
				break
			}
		}
		if _, ok := s.next(); !ok {
			return false
		}
	}
}

// runes reads a string value rune by rune: JSON escapes resolved, lowercase applied.
type runes struct {
	s     []byte
	esc   bool
	lower bool
	i     int
}

func newRunes(v value) runes { return runes{s: v.s, esc: v.esc, lower: v.lower} }

func (r *runes) next() (rune, bool) {
	if r.i >= len(r.s) {
		return 0, false
	}
	if b := r.s[r.i]; b < utf8.RuneSelf && b != '\\' { // ASCII: the common case
		r.i++
		if r.lower && 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		return rune(b), true
	}
	var c rune
	if r.esc && r.s[r.i] == '\\' && r.i+1 < len(r.s) {
		c = r.unescape()
	} else {
		var size int
		c, size = utf8.DecodeRune(r.s[r.i:])
		r.i += size
	}
	if r.lower {
		c = unicode.ToLower(c)
	}
	return c, true
}

// unescape reads the JSON escape at r.s[r.i] ('\\').
func (r *runes) unescape() rune {
	e := r.s[r.i+1]
	r.i += 2
	switch e {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'u':
		c, ok := r.hex4()
		if !ok {
			return utf8.RuneError
		}
		if c >= 0xD800 && c < 0xDC00 && r.i+1 < len(r.s) && r.s[r.i] == '\\' && r.s[r.i+1] == 'u' {
			save := r.i
			r.i += 2
			if lo, ok := r.hex4(); ok && lo >= 0xDC00 && lo < 0xE000 {
				return (c-0xD800)<<10 | (lo - 0xDC00) + 0x10000
			}
			r.i = save
		}
		if c >= 0xD800 && c < 0xE000 {
			return utf8.RuneError
		}
		return c
	}
	return rune(e) // '"', '\\', '/'
}

func (r *runes) hex4() (rune, bool) {
	if r.i+4 > len(r.s) {
		r.i = len(r.s)
		return 0, false
	}
	var c rune
	for _, h := range r.s[r.i : r.i+4] {
		switch {
		case h >= '0' && h <= '9':
			c = c<<4 | rune(h-'0')
		case h >= 'a' && h <= 'f':
			c = c<<4 | rune(h-'a'+10)
		case h >= 'A' && h <= 'F':
			c = c<<4 | rune(h-'A'+10)
		default:
			r.i += 4
			return 0, false
		}
	}
	r.i += 4
	return c, true
}

// listIter reads the elements of a list value: a literal's values or a JSON array's.
type listIter struct {
	v value
	i int // index in lits, or byte offset in the raw array
}

func (it *listIter) next() (value, bool) {
	if it.v.s == nil {
		if it.i >= len(it.v.lits) {
			return value{}, false
		}
		it.i++
		return it.v.lits[it.i-1], true
	}
	b := it.v.s
	if it.i == 0 {
		it.i = 1 // past '['
	}
	i := skipSpace(b, it.i)
	if i < len(b) && b[i] == ',' {
		i = skipSpace(b, i+1)
	}
	if i >= len(b) || b[i] == ']' {
		it.i = len(b)
		return value{}, false
	}
	end := skipValue(b, i)
	if end < 0 {
		it.i = len(b)
		return value{}, false
	}
	it.i = end
	return jsonValue(b[i:end]), true
}

// jsonValue is the value of one raw JSON value.
func jsonValue(raw []byte) value {
	if len(raw) == 0 {
		return value{}
	}
	switch c := raw[0]; {
	case c == '"':
		if len(raw) < 2 {
			return value{}
		}
		s := raw[1 : len(raw)-1]
		esc := false
		for _, c := range s {
			if c == '\\' {
				esc = true
				break
			}
		}
		return value{k: kString, s: s, esc: esc}
	case c == 't':
		return value{k: kBool, b: true}
	case c == 'f':
		return value{k: kBool}
	case c == '[':
		return value{k: kList, s: raw}
	case c == '{':
		return value{k: kObject, s: raw}
	case c == '-' || c >= '0' && c <= '9':
		// The string does not outlive the call: ParseFloat keeps it only in its error.
		f, err := strconv.ParseFloat(unsafe.String(&raw[0], len(raw)), 64)
		if err != nil {
			return value{}
		}
		return value{k: kNumber, n: f}
	}
	return value{}
}

// specialize returns a faster node for the commonest comparisons — a field against a string
// (`event = 'Order Completed'`) — or n itself.
func specialize(n *cmpNode) node {
	f, ok := n.l.(*fieldNode)
	lit, ok2 := n.r.(*litNode)
	if !ok || !ok2 {
		return n
	}
	switch {
	case lit.v.k == kString && (n.op == opEq || n.op == opNe) && !bytes.ContainsRune(lit.v.s, '\\'):
		return &fieldStrEq{cmp: n, path: f.path, lit: lit.v.s, neg: n.op == opNe}
	}
	return n
}

// fieldStrEq is `field = 'text'` (or !=): a JSON string without escapes is compared as bytes.
type fieldStrEq struct {
	cmp  *cmpNode
	path *pathRef
	lit  []byte
	neg  bool
}

func (n *fieldStrEq) eval(m *Message) value { return value{k: kBool, b: n.test(m)} }

func (n *fieldStrEq) test(m *Message) bool {
	raw, _ := m.rawAt(n.path)
	if len(raw) >= 2 && raw[0] == '"' {
		if s := raw[1 : len(raw)-1]; string(s) == string(n.lit) {
			return !n.neg
		} else if bytes.IndexByte(s, '\\') < 0 {
			return n.neg
		}
	}
	return n.cmp.test(m)
}
