package schemas

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// A small JSON scanner: it validates the whole of its input, as strictly as encoding/json's
// json.Valid, but builds nothing. Decoders use it to walk the members of one object and slice
// out each value's raw bytes, so free-form values (context, properties, traits) keep every key
// and every number exactly as sent, and the hot paths of ingest and router allocate only for
// the fields they read. encoding/json would either round numbers (map[string]any) or walk
// every value twice (json.RawMessage fields are validated and then copied); measured on a
// 400-byte track call this scanner is several times faster (BenchmarkDecodeValidateEncode).

// syntaxError is a JSON syntax error at a byte offset.
type syntaxError struct {
	msg string
	off int
}

func (e *syntaxError) Error() string { return fmt.Sprintf("invalid JSON at byte %d: %s", e.off, e.msg) }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value that starts at b[i] (no leading
// space), validating it.
func skipValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, &syntaxError{"unexpected end of input", i}
	}
	switch c := b[i]; {
	case c == '"':
		end, _, err := scanString(b, i)
		return end, err
	case c == '{':
		if depth >= maxDepth {
			return i, &syntaxError{"nested too deeply", i}
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return i, &syntaxError{"expected a string key", i}
			}
			end, _, err := scanString(b, i)
			if err != nil {
				return end, err
			}
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ':' {
				return i, &syntaxError{"expected ':' after a key", i}
			}
			i = skipSpace(b, i+1)
			if i, err = skipValue(b, i, depth+1); err != nil {
				return i, err
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return i, &syntaxError{"unexpected end of input in an object", i}
			}
			if b[i] == '}' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return i, &syntaxError{"expected ',' or '}' in an object", i}
			}
			i = skipSpace(b, i+1)
		}
	case c == '[':
		if depth >= maxDepth {
			return i, &syntaxError{"nested too deeply", i}
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = skipValue(b, i, depth+1); err != nil {
				return i, err
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return i, &syntaxError{"unexpected end of input in an array", i}
			}
			if b[i] == ']' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return i, &syntaxError{"expected ',' or ']' in an array", i}
			}
			i = skipSpace(b, i+1)
		}
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(b, i)
	default:
		return i, &syntaxError{fmt.Sprintf("unexpected character %q", c), i}
	}
}

func skipLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, &syntaxError{"invalid literal", i}
	}
	return i + len(lit), nil
}

// scanNumber validates the JSON number grammar.
func scanNumber(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return i, &syntaxError{"invalid number", start}
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return i, &syntaxError{"invalid number", start}
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return i, &syntaxError{"invalid number", start}
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return i, &syntaxError{"invalid number", start}
		}
	}
	return i, nil
}

// scanString validates the string starting at b[i] == '"' and returns the index past its
// closing quote and whether it holds escapes (then unquote needs the slow path).
func scanString(b []byte, i int) (end int, escaped bool, err error) {
	start := i
	i++
	for i < len(b) {
		// Fast path: skip 8 plain bytes at a time (no quote, backslash or control character;
		// SWAR: a byte-wise "has zero" test of x^'"', x^'\\' and x < 0x20).
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			if hasZeroByte(x^(swarOnes*'"'))|hasZeroByte(x^(swarOnes*'\\'))|((x-swarOnes*0x20)&^x&swarHighs) != 0 {
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return i, escaped, &syntaxError{"unterminated string", start}
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return i, escaped, &syntaxError{"invalid \\u escape", i}
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return i, escaped, &syntaxError{"invalid \\u escape", i}
					}
				}
				i += 6
			default:
				return i, escaped, &syntaxError{"invalid escape", i}
			}
		case c < 0x20:
			return i, escaped, &syntaxError{"control character in a string", i}
		default:
			i++
		}
	}
	return i, escaped, &syntaxError{"unterminated string", start}
}

const (
	swarOnes  = 0x0101010101010101
	swarHighs = 0x8080808080808080
)

// hasZeroByte is non-zero when some byte of x is zero.
func hasZeroByte(x uint64) uint64 { return (x - swarOnes) & ^x & swarHighs }

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// unquote returns the Go string of the valid JSON string raw (quotes included).
func unquote(raw []byte, escaped bool) string {
	if !escaped {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return string(raw[1 : len(raw)-1]) // unreachable: raw was validated
	}
	return s
}

// member is one member of a JSON object: its key, unquoted, and its value's raw bytes.
type member struct {
	key   string
	value []byte
}

// eachMember validates that b is exactly one JSON object (surrounding space allowed) and calls
// fn for each member in order. It stops at fn's first error.
func eachMember(b []byte, fn func(key []byte, escaped bool, value []byte) error) error {
	return eachMemberScan(b, nil, fn)
}

// EachMember validates that b is exactly one JSON object, as strictly as json.Valid (and at
// most 128 levels deep), and calls fn with each member's key, unescaped, and its value's raw
// bytes, in order. It stops at fn's first error and returns it. With JSONString it lets a reader
// that keeps a few members of a record decode only those (the console's views,
// docs/benchmarks.md#console). key and value alias b (key is a fresh slice when it held
// escapes): copy what is kept.
func EachMember(b []byte, fn func(key, value []byte) error) error {
	return eachMember(b, func(k []byte, esc bool, v []byte) error { return fn(keyBytes(k, esc), v) })
}

// EachElement validates that b is exactly one JSON array, as strictly as EachMember, and calls
// fn with each element's raw bytes, in order; it stops at fn's first error and returns it.
// value aliases b. With EachMember it lets a hot reader decode an array of objects without
// encoding/json's reflection (audiences' hand-offs, docs/benchmarks.md#audiences).
func EachElement(b []byte, fn func(value []byte) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return &syntaxError{"expected an array", i}
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return checkTrailing(b, i+1)
	}
	for {
		start := i
		var err error
		if i, err = skipValue(b, i, 1); err != nil {
			return err
		}
		if err := fn(b[start:i]); err != nil {
			return err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return &syntaxError{"unexpected end of input in an array", i}
		}
		if b[i] == ']' {
			return checkTrailing(b, i+1)
		}
		if b[i] != ',' {
			return &syntaxError{"expected ',' or ']' in an array", i}
		}
		i = skipSpace(b, i+1)
	}
}

// JSONString returns the text of the JSON string raw (quotes included; a value EachMember gave)
// exactly as encoding/json decodes it: escapes resolved, every byte of invalid UTF-8 replaced by
// U+FFFD. It aliases raw when raw holds neither (the common case). ok is false when raw is not a
// string (null, a number, an object...).
func JSONString(raw []byte) (text []byte, ok bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return nil, false
	}
	if inner := raw[1 : len(raw)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return inner, true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil, false
	}
	return []byte(s), true
}

// memberScanner scans (and validates) one member's value starting at b[i] in place of
// skipValue, returning the value's end; handled false leaves the value to skipValue. It lets a
// caller that must walk a large value anyway (a batch's array) validate it in the same pass.
type memberScanner func(key []byte, escaped bool, b []byte, i int) (end int, handled bool, err error)

// eachMemberScan is eachMember with a scanner for chosen members' values (nil: none).
func eachMemberScan(b []byte, scan memberScanner, fn func(key []byte, escaped bool, value []byte) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) {
		return &syntaxError{"empty input", i}
	}
	if b[i] != '{' {
		return errNotObject
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return checkTrailing(b, i+1)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return &syntaxError{"expected a string key", i}
		}
		kEnd, kEsc, err := scanString(b, i)
		if err != nil {
			return err
		}
		key := b[i:kEnd]
		i = skipSpace(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return &syntaxError{"expected ':' after a key", i}
		}
		i = skipSpace(b, i+1)
		vStart := i
		handled := false
		if scan != nil {
			if i, handled, err = scan(key, kEsc, b, i); err != nil {
				return err
			}
		}
		if !handled {
			if i, err = skipValue(b, i, 1); err != nil {
				return err
			}
		}
		if err := fn(key, kEsc, b[vStart:i]); err != nil {
			return err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return &syntaxError{"unexpected end of input in an object", i}
		}
		if b[i] == '}' {
			return checkTrailing(b, i+1)
		}
		if b[i] != ',' {
			return &syntaxError{"expected ',' or '}' in an object", i}
		}
		i = skipSpace(b, i+1)
	}
}

func checkTrailing(b []byte, i int) error {
	if i = skipSpace(b, i); i != len(b) {
		return &syntaxError{"data after the top-level value", i}
	}
	return nil
}

// keyBytes returns the key's text: a sub-slice of the raw key (quotes included) when it holds
// no escapes, so `switch string(keyBytes(k, esc))` does not allocate.
func keyBytes(key []byte, escaped bool) []byte {
	if !escaped {
		return key[1 : len(key)-1]
	}
	return []byte(unquote(key, true))
}

// keyIs reports whether the raw key (quotes included) is name.
func keyIs(key []byte, escaped bool, name string) bool {
	if !escaped {
		return len(key) == len(name)+2 && string(key[1:len(key)-1]) == name
	}
	return unquote(key, true) == name
}

// AppendJSONString appends s as a JSON string, escaping what JSON requires; invalid UTF-8
// becomes U+FFFD, as encoding/json does.
func AppendJSONString(dst []byte, s string) []byte { return appendString(dst, s) }

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as encoding/json does.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				const hex = "0123456789abcdef"
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\uFFFD"...) // the replacement character itself, so re-encoding is stable
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// WithoutMember returns obj without its top-level member key (every occurrence). When obj is
// not a valid JSON object, or has no such member, it is returned as it is. Ingest uses it to
// keep a body "writeKey" (a secret) out of tracking.rejected.
func WithoutMember(obj []byte, key string) []byte {
	found := false
	if eachMember(obj, func(k []byte, esc bool, _ []byte) error {
		found = found || keyIs(k, esc, key)
		return nil
	}) != nil || !found {
		return obj
	}
	out := make([]byte, 0, len(obj))
	out = append(out, '{')
	_ = eachMember(obj, func(k []byte, esc bool, v []byte) error {
		if keyIs(k, esc, key) {
			return nil
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(out, k...), ':'), v...)
		return nil
	})
	return append(out, '}')
}
