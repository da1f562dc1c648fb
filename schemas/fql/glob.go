package fql

import "errors"

// glob reports whether the pattern matches the whole of s: `*` any run of characters, `?` one
// character, `[abc]` and `[a-z]` one of a set (`[!...]` or `[^...]` one not in it), `\x` the
// character x. It backtracks only to the last `*`, so it runs in O(len(p)·len(s)).
func glob(p, s runes) bool {
	var starP, starS runes
	star := false
	for {
		pc, pok := p.next()
		if pok && pc == '*' {
			star, starP, starS = true, p, s
			continue
		}
		if pok {
			ss := s
			if sc, sok := ss.next(); sok && matchOne(pc, &p, sc) {
				s = ss
				continue
			}
		} else if _, sok := s.next(); !sok {
			return true
		}
		if !star {
			return false
		}
		if _, ok := starS.next(); !ok {
			return false
		}
		p, s = starP, starS
	}
}

// matchOne reports whether the pattern character pc (with what follows it in p, for a class or
// an escape, consumed) matches c.
func matchOne(pc rune, p *runes, c rune) bool {
	switch pc {
	case '?':
		return true
	case '\\':
		e, ok := p.next()
		return ok && e == c
	case '[':
		negate, matched, first := false, false, true
		for {
			r, ok := p.next()
			if !ok {
				return false // unclosed: Compile refuses it for a literal pattern
			}
			if first && (r == '!' || r == '^') {
				negate, first = true, false
				continue
			}
			if r == ']' && !first {
				return matched != negate
			}
			first = false
			if r == '\\' {
				if r, ok = p.next(); !ok {
					return false
				}
			}
			lo, hi := r, r
			save := *p
			if d, ok := p.next(); ok && d == '-' {
				if h, ok := p.next(); ok && h != ']' {
					if h == '\\' {
						h, _ = p.next()
					}
					hi = h
				} else {
					*p = save
				}
			} else {
				*p = save
			}
			if lo <= c && c <= hi {
				matched = true
			}
		}
	}
	return pc == c
}

// checkGlob reports a malformed pattern: an unclosed '[' or a trailing '\'.
func checkGlob(pattern []byte) error {
	p := runes{s: pattern}
	for {
		c, ok := p.next()
		if !ok {
			return nil
		}
		switch c {
		case '\\':
			if _, ok := p.next(); !ok {
				return errors.New("the pattern ends with '\\': expected a character after it")
			}
		case '[':
			first := true
			for {
				r, ok := p.next()
				if !ok {
					return errors.New("the pattern has a '[' without its ']'")
				}
				if first && (r == '!' || r == '^') {
					first = false
					continue
				}
				if r == ']' && !first {
					break
				}
				first = false
				if r == '\\' {
					p.next()
				}
			}
		}
	}
}
