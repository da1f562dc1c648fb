package fql

// maxIndexed is how many top-level members a Message indexes; a message with more (rare: a
// Segment message has about a dozen) has the rest scanned for on each lookup.
const maxIndexed = 32

// member is the offsets of one object member in the raw bytes: key content (between the
// quotes) and value.
type member struct {
	keyStart, keyEnd, valStart, valEnd int32
	keyEsc                             bool
}

// Message is one message's raw JSON, with its top-level members indexed on the first
// lookup so that the expressions evaluated on it share one scan. The zero Message is an
// empty one; Reset points it at a message. The raw bytes must be one JSON object (malformed
// bytes make fields missing, never a panic) and stay unchanged while the Message is used.
type Message struct {
	raw     []byte
	indexed bool
	more    bool // members past maxIndexed
	rest    int  // offset of the first member not indexed
	n       int
	members [maxIndexed]member
}

// Reset points m at raw, forgetting the previous message.
func (m *Message) Reset(raw []byte) {
	m.raw, m.indexed, m.more, m.n = raw, false, false, 0
}

func (m *Message) index() {
	m.indexed = true
	b := m.raw
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' || len(b) > 1<<31-1 {
		return
	}
	it := objIter{b: b, i: i + 1}
	for m.n < maxIndexed {
		mb, ok := it.next()
		if !ok {
			return
		}
		m.members[m.n] = mb
		m.n++
	}
	m.more, m.rest = true, it.i
}

// lookup returns the value at path, or null when it is missing.
func (m *Message) lookup(path []string) value {
	if !m.indexed {
		m.index()
	}
	b := m.raw
	var raw []byte
	for i := 0; i < m.n; i++ {
		mb := &m.members[i]
		if keyEquals(b[mb.keyStart:mb.keyEnd], mb.keyEsc, path[0]) {
			raw = b[mb.valStart:mb.valEnd] // the last of duplicate keys wins, as in encoding/json
		}
	}
	if m.more {
		if r, ok := findMember(b, m.rest, path[0]); ok {
			raw = r
		}
	}
	if raw == nil {
		return value{}
	}
	for _, seg := range path[1:] {
		if len(raw) == 0 || raw[0] != '{' {
			return value{}
		}
		r, ok := findMember(raw, 1, seg)
		if !ok {
			return value{}
		}
		raw = r
	}
	return jsonValue(raw)
}

// findMember returns the value of the last member named key of the object whose members start
// at b[i] (just past '{', or past a member).
func findMember(b []byte, i int, key string) ([]byte, bool) {
	it := objIter{b: b, i: i}
	var out []byte
	found := false
	for mb, ok := it.next(); ok; mb, ok = it.next() {
		if keyEquals(b[mb.keyStart:mb.keyEnd], mb.keyEsc, key) {
			out, found = b[mb.valStart:mb.valEnd], true
		}
	}
	return out, found
}

// keyEquals reports whether a raw key's content (escapes unresolved when esc) is key.
func keyEquals(raw []byte, esc bool, key string) bool {
	if !esc {
		return string(raw) == key
	}
	r := runes{s: raw, esc: true}
	for _, want := range key {
		got, ok := r.next()
		if !ok || got != want {
			return false
		}
	}
	_, more := r.next()
	return !more
}

// objIter walks the members of an object from b[i] (past '{' or past a member's value).
type objIter struct {
	b []byte
	i int
}

func (it *objIter) next() (member, bool) {
	b := it.b
	i := skipSpace(b, it.i)
	if i < len(b) && b[i] == ',' {
		i = skipSpace(b, i+1)
	}
	if i >= len(b) || b[i] != '"' {
		it.i = len(b)
		return member{}, false
	}
	kEnd, esc := skipString(b, i)
	if kEnd < 0 {
		it.i = len(b)
		return member{}, false
	}
	j := skipSpace(b, kEnd)
	if j >= len(b) || b[j] != ':' {
		it.i = len(b)
		return member{}, false
	}
	j = skipSpace(b, j+1)
	vEnd := skipValue(b, j)
	if vEnd < 0 {
		it.i = len(b)
		return member{}, false
	}
	it.i = vEnd
	return member{keyStart: int32(i + 1), keyEnd: int32(kEnd - 1), valStart: int32(j), valEnd: int32(vEnd), keyEsc: esc}, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the offset past the string at b[i] ('"') and whether it holds escapes;
// -1 when it is not closed.
func skipString(b []byte, i int) (int, bool) {
	esc := false
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			esc = true
			i++
		case '"':
			return i + 1, esc
		}
	}
	return -1, esc
}

// skipValue returns the offset past the JSON value at b[i], or -1. It trusts the bytes to be
// valid JSON (the router decoded them already) and only guards against running off the end.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := skipString(b, i)
		return end
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, _ := skipString(b, i)
				if end < 0 {
					return -1
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if j == i {
				return -1
			}
			return j
		}
		j++
	}
	if j == i {
		return -1
	}
	return j
}
