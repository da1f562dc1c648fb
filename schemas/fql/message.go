package fql

import (
	"strings"
	"sync"
)

// A Message indexes the members of the objects its lookups go through (the message itself,
// then context, properties...), each object once, into a fixed pool of slots: the filters of
// a destination read a handful of fields of the same few objects. Past the pool, lookups scan.
const (
	maxSlots   = 96 // members indexed, in all objects
	maxObjects = 12 // objects indexed
)

// member is the offsets of one object member in the raw bytes: key content (between the
// quotes) and value.
type member struct {
	keyStart, keyEnd, valStart, valEnd int32
	keyEsc                             bool
}

// object is one indexed object: its start in the raw bytes and its members' slots;
// complete is false when the pool ran out before its end (the rest is scanned from rest).
type object struct {
	start    int32
	first, n int16
	complete bool
	rest     int32
}

// Message is one message's raw JSON, indexed as lookups need it so that the expressions
// evaluated on it share the scans. The zero Message is an empty one; Reset points it at a
// message. The raw bytes must be one JSON object (malformed bytes make fields missing, never a
// panic) and stay unchanged while the Message is used. A Message is a few kilobytes: reuse one.
type Message struct {
	raw      []byte
	nSlots   int
	nObjects int
	slots    [maxSlots]member
	objects  [maxObjects]object
	// found caches the values of the last paths looked up, by interned path: the filters of
	// a destination often read the same fields (event, type).
	nFound int
	found  [maxCached]found
}

// maxCached is how many looked-up paths a Message remembers.
const maxCached = 24

// Reset points m at raw, forgetting the previous message.
func (m *Message) Reset(raw []byte) {
	m.raw, m.nSlots, m.nObjects, m.nFound = raw, 0, 0, 0
}

// BeginTop starts indexing the top-level members of a message as its writer writes them
// (AddTop each, in order, then EndTop with the bytes written), instead of the first lookup
// scanning them again.
func (m *Message) BeginTop() {
	m.raw, m.nSlots, m.nObjects, m.nFound = nil, 0, 0, 0
}

// AddTop notes one top-level member: the offsets, in the bytes EndTop will be given, of its
// key's content (between the quotes; escaped when keyEsc) and of its value.
func (m *Message) AddTop(keyStart, keyEnd, valStart, valEnd int, keyEsc bool) {
	if m.nSlots == maxSlots {
		m.nSlots++ // past the pool: EndTop leaves the rest to a scan
		return
	}
	if m.nSlots > maxSlots || valEnd > 1<<31-1 {
		return
	}
	m.slots[m.nSlots] = member{keyStart: int32(keyStart), keyEnd: int32(keyEnd), valStart: int32(valStart), valEnd: int32(valEnd), keyEsc: keyEsc}
	m.nSlots++
}

// EndTop points m at raw, one JSON object starting at raw[0], whose top-level members were
// all given to AddTop since BeginTop.
func (m *Message) EndTop(raw []byte) {
	m.raw, m.nFound = raw, 0
	if len(raw) == 0 || raw[0] != '{' || len(raw) > 1<<31-1 {
		m.nSlots, m.nObjects = 0, 0
		return
	}
	o := object{start: 0, first: 0, n: int16(min(m.nSlots, maxSlots)), complete: m.nSlots <= maxSlots}
	if !o.complete {
		m.nSlots = maxSlots
		o.rest = m.slots[maxSlots-1].valEnd
	}
	m.objects[0], m.nObjects = o, 1
}

// pathRef is an interned field path: every expression naming the same path shares one, so a
// Message can cache a lookup for all of them by pointer. parent is the path without its last
// segment (nil for a top-level field), interned too: context.library.name and
// context.library.version find context.library once.
type pathRef struct {
	segs   []string
	parent *pathRef
}

var (
	internMu sync.Mutex
	interned = map[string]*pathRef{}
)

// maxInterned bounds the intern table (paths of configs long replaced stay in it): past it,
// paths are not shared, only not cached across expressions.
const maxInterned = 100_000

func intern(segs []string) *pathRef {
	internMu.Lock()
	defer internMu.Unlock()
	return internLocked(segs)
}

func internLocked(segs []string) *pathRef {
	key := strings.Join(segs, "\x00")
	if p, ok := interned[key]; ok {
		return p
	}
	p := &pathRef{segs: segs}
	if len(segs) > 1 {
		p.parent = internLocked(segs[:len(segs)-1])
	}
	if len(interned) < maxInterned {
		interned[key] = p
	}
	return p
}

// lookupCached returns the value at p, through the cache of found values.
func (m *Message) lookupCached(p *pathRef) value {
	raw, ok := m.rawAt(p)
	if !ok {
		return value{}
	}
	return jsonValue(raw)
}

// rawAt returns the raw value at p, caching it (and its parents').
func (m *Message) rawAt(p *pathRef) ([]byte, bool) {
	for i := 0; i < m.nFound; i++ {
		if f := &m.found[i]; f.path == p {
			return f.raw, f.ok
		}
	}
	b := m.raw
	var start int
	if p.parent == nil {
		if len(b) > 1<<31-1 {
			return nil, false
		}
		start = skipSpace(b, 0)
	} else {
		r, ok := m.rawAt(p.parent)
		if !ok {
			return m.remember(p, nil, false)
		}
		start = cap(b) - cap(r) // r's offset in b
	}
	if start >= len(b) || b[start] != '{' {
		return m.remember(p, nil, false)
	}
	r, ok := m.member(start, p.segs[len(p.segs)-1])
	return m.remember(p, r, ok)
}

func (m *Message) remember(p *pathRef, raw []byte, ok bool) ([]byte, bool) {
	if m.nFound < maxCached {
		m.found[m.nFound] = found{path: p, raw: raw, ok: ok}
		m.nFound++
	}
	return raw, ok
}

// found is a cached lookup.
type found struct {
	path *pathRef
	raw  []byte
	ok   bool
}

// object returns the index of the object starting at raw[start] ('{'), indexing it first;
// -1 when the pool of objects is full.
func (m *Message) object(start int) int {
	for i := 0; i < m.nObjects; i++ {
		if int(m.objects[i].start) == start {
			return i
		}
	}
	if m.nObjects == maxObjects {
		return -1
	}
	o := &m.objects[m.nObjects]
	*o = object{start: int32(start), first: int16(m.nSlots), complete: true}
	it := objIter{b: m.raw, i: start + 1}
	for {
		if m.nSlots == maxSlots {
			o.complete, o.rest = false, int32(it.i)
			break
		}
		mb, ok := it.next()
		if !ok {
			break
		}
		m.slots[m.nSlots] = mb
		m.nSlots++
		o.n++
	}
	m.nObjects++
	return m.nObjects - 1
}

// member returns the value of the last member named key of the object at raw[start].
func (m *Message) member(start int, key string) ([]byte, bool) {
	b := m.raw
	oi := m.object(start)
	if oi < 0 {
		return findMember(b, start+1, key)
	}
	o := &m.objects[oi]
	// The last of duplicate keys wins, as in encoding/json: look from the end.
	if !o.complete {
		if r, ok := findMember(b, int(o.rest), key); ok {
			return r, true
		}
	}
	for i := int(o.first) + int(o.n) - 1; i >= int(o.first); i-- {
		mb := &m.slots[i]
		if !mb.keyEsc && int(mb.keyEnd-mb.keyStart) != len(key) {
			continue
		}
		if keyEquals(b[mb.keyStart:mb.keyEnd], mb.keyEsc, key) {
			return b[mb.valStart:mb.valEnd], true
		}
	}
	return nil, false
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
// -1 when it is not closed. Byte by byte: most strings of a message are short, and eight
// bytes at a time (as schemas' validating scanner reads) measured slower here.
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

// structural marks the bytes skipValue stops at inside an object or array.
var structural = [256]bool{'"': true, '{': true, '[': true, '}': true, ']': true}

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
			if !structural[b[i]] {
				continue
			}
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
