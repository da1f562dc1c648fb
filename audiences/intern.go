package audiences

import "bytes"

// interner shares the strings that many profiles hold (trait keys, event names, aggregate
// and sync ids, and short values such as a plan or a country) instead of each profile
// holding its own copy: a million profiles would otherwise keep a million copies of "plan"
// (docs/audiences.md#memory). It holds at most maxInterned strings (the first ones seen; a
// string beyond is kept as it is) of at most maxInternLen bytes. It is not safe for
// concurrent use: the transform (under Service.mu) is its only user. A nil interner returns
// every string as it is.
type interner struct{ m map[string]string }

const (
	maxInterned  = 1 << 16
	maxInternLen = 32
)

func newInterner() *interner { return &interner{m: map[string]string{}} }

// str returns the shared copy of s.
func (in *interner) str(s string) string {
	if in == nil || len(s) > maxInternLen {
		return s
	}
	if t, ok := in.m[s]; ok {
		return t
	}
	if len(in.m) < maxInterned {
		in.m[s] = s
	}
	return s
}

// parseVal is parseVal(raw) with its string shared, without copying a plain string (as
// plainString reads it) that is shared already.
func (in *interner) parseVal(raw []byte) val {
	if in != nil {
		if s, ok := plainString(bytes.TrimSpace(raw)); ok {
			if t, ok := in.m[string(s)]; ok {
				return strVal(t)
			}
		}
	}
	return in.val(parseVal(raw))
}

// val returns v with its string shared (a string value; objects and lists are kept).
func (in *interner) val(v val) val {
	if v.k == kString {
		v.s = in.str(v.s)
	}
	return v
}

// profile shares the strings of a profile read from the changelog.
func (in *interner) profile(p *profile) {
	if in == nil {
		return
	}
	p.unpack()
	for i := range p.Traits {
		p.Traits[i].K, p.Traits[i].V = in.str(p.Traits[i].K), in.val(p.Traits[i].V)
	}
	aggs := p.aggs()
	for i := range aggs {
		a := &aggs[i]
		if first, last, ok := a.fl(); ok {
			first.V, last.V = in.val(first.V), in.val(last.V)
			a.setFL(first, last)
		}
		for j, fs := 0, a.freqs(); j < len(fs); j++ {
			fs[j].V = in.val(fs[j].V)
		}
		for j, vs := 0, a.uniques(); j < len(vs); j++ {
			vs[j] = in.val(vs[j])
		}
	}
	for i, ts := 0, p.tracks(); i < len(ts); i++ {
		ts[i].Event, ts[i].Source = in.str(ts[i].Event), in.str(ts[i].Source)
	}
}
