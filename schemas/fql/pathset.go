package fql

import "fmt"

// ParsePath parses a field path as FQL writes it (`context.ip`, `properties.product\ 1.price`)
// into its segments.
func ParsePath(s string) ([]string, error) {
	l := lexer{src: s}
	t, err := l.next()
	if err == nil && t.kind != tPath {
		err = &Error{Column: 1, Msg: "expected a field path such as properties.email"}
	}
	if err == nil && l.off != len(s) {
		err = l.errAt(l.off, "expected the end of the field path")
	}
	if err != nil {
		return nil, err
	}
	return t.path, nil
}

// PathSet is a set of field paths, to remove from a JSON object (Drop) or to keep alone (Keep).
// It is immutable once built: safe for concurrent use.
type PathSet struct {
	root pathNode
}

// pathNode is one segment of the set's paths: leaf when a listed path ends here.
type pathNode struct {
	leaf     bool
	children map[string]*pathNode
}

// NewPathSet parses the paths (see ParsePath).
func NewPathSet(paths []string) (*PathSet, error) {
	ps := &PathSet{}
	for _, p := range paths {
		segs, err := ParsePath(p)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", p, err)
		}
		n := &ps.root
		for _, s := range segs {
			if n.children == nil {
				n.children = map[string]*pathNode{}
			}
			c := n.children[s]
			if c == nil {
				c = &pathNode{}
				n.children[s] = c
			}
			n = c
		}
		n.leaf = true
	}
	return ps, nil
}

// AppendDropped appends to dst the JSON object obj without the set's paths (a path through a
// value that is not an object, or that is missing, removes nothing). obj must be a valid JSON
// object; it is appended unchanged when it is not an object.
func (ps *PathSet) AppendDropped(dst, obj []byte) []byte { return rewrite(dst, obj, &ps.root, drop) }

// AppendKept appends to dst the JSON object obj where each top-level member the set names
// keeps only the listed paths below it (a member listed whole is kept whole); the members the
// set does not name are kept as they are.
func (ps *PathSet) AppendKept(dst, obj []byte) []byte { return rewrite(dst, obj, &ps.root, keepNamed) }

type rewriteMode uint8

const (
	drop      rewriteMode = iota // remove the listed paths
	keepNamed                    // the top level: unnamed members stay, named ones are restricted
	keepOnly                     // below a named member: only the listed paths stay
)

// rewrite copies obj's members to dst as mode and n's paths say.
func rewrite(dst, obj []byte, n *pathNode, mode rewriteMode) []byte {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return append(dst, obj...)
	}
	dst = append(dst, '{')
	first := true
	it := objIter{b: obj, i: i + 1}
	for m, ok := it.next(); ok; m, ok = it.next() {
		key, val := obj[m.keyStart:m.keyEnd], obj[m.valStart:m.valEnd]
		c := childOf(n, key, m.keyEsc)
		switch {
		case c == nil && mode == keepOnly:
			continue // not listed
		case c != nil && c.leaf && mode == drop:
			continue // listed: dropped whole
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, '"')
		dst = append(dst, key...)
		dst = append(dst, '"', ':')
		if c == nil || c.leaf || len(c.children) == 0 || len(val) == 0 || val[0] != '{' {
			dst = append(dst, val...) // unlisted, kept whole, or not an object to choose in
			continue
		}
		sub := keepOnly
		if mode == drop {
			sub = drop
		}
		dst = rewrite(dst, val, c, sub)
	}
	return append(dst, '}')
}

// childOf returns n's child for a raw key, or nil.
func childOf(n *pathNode, key []byte, esc bool) *pathNode {
	if len(n.children) == 0 {
		return nil
	}
	if !esc {
		return n.children[string(key)]
	}
	for name, c := range n.children {
		if keyEquals(key, esc, name) {
			return c
		}
	}
	return nil
}

// AppendDroppedFrom is AppendDropped of the object m holds, reusing the members m indexed
// while expressions were evaluated on it: only the removed members' bytes are skipped, the
// rest copied in runs.
func (ps *PathSet) AppendDroppedFrom(dst []byte, m *Message) []byte {
	return rewriteIndexed(dst, m, skipSpace(m.raw, 0), m.raw, &ps.root, drop)
}

// AppendKeptFrom is AppendKept of the object m holds, reusing its index (see AppendDroppedFrom).
func (ps *PathSet) AppendKeptFrom(dst []byte, m *Message) []byte {
	return rewriteIndexed(dst, m, skipSpace(m.raw, 0), m.raw, &ps.root, keepNamed)
}

// rewriteIndexed is rewrite of obj, the object at m.raw[start:], through m's index of it.
func rewriteIndexed(dst []byte, m *Message, start int, obj []byte, n *pathNode, mode rewriteMode) []byte {
	if start >= len(m.raw) || m.raw[start] != '{' || len(m.raw) > 1<<31-1 {
		return rewrite(dst, obj, n, mode)
	}
	oi := m.object(start)
	if oi < 0 || !m.objects[oi].complete {
		return rewrite(dst, obj, n, mode)
	}
	o := m.objects[oi]
	b := m.raw
	dst = append(dst, '{')
	first := true
	for i := int(o.first); i < int(o.first)+int(o.n); i++ {
		mb := m.slots[i]
		c := childOf(n, b[mb.keyStart:mb.keyEnd], mb.keyEsc)
		switch {
		case c == nil && mode == keepOnly:
			continue
		case c != nil && c.leaf && mode == drop:
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		val := b[mb.valStart:mb.valEnd]
		if c == nil || c.leaf || len(c.children) == 0 || len(val) == 0 || val[0] != '{' {
			dst = append(dst, b[mb.keyStart-1:mb.valEnd]...) // "key":value as sent
			continue
		}
		dst = append(dst, b[mb.keyStart-1:mb.valStart]...)
		sub := keepOnly
		if mode == drop {
			sub = drop
		}
		dst = rewriteIndexed(dst, m, int(mb.valStart), val, c, sub)
	}
	return append(dst, '}')
}
