package schemas

import (
	"encoding/json"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// A pre-check for the router's path (docs/routing.md#tracking-plans): most calls keep their
// plan, and most plans use a few keywords (type, properties, required, additionalProperties,
// items, enum of strings, numeric bounds, lengths, pattern). For a schema made only of those,
// fastSchema.valid reads the raw JSON, without decoding it and without allocating, and answers
// "surely valid" or "don't know". Only "don't know" (a violation, or something it does not
// handle) runs the full validator, which finds the violations. It never answers "valid" for a
// value the validator refuses: numbers are compared as float64, whose rounding keeps order,
// and a value equal to a bound after rounding is "don't know"; a string with escapes, an
// integer written with a fraction or an exponent, a value under "format", likewise.

// JSON types as bits of fastSchema.types.
const (
	fNull = 1 << iota
	fBool
	fInt
	fNum
	fStr
	fArr
	fObj
)

type fastSchema struct {
	types        uint8 // 0: any
	props        map[string]*fastSchema
	required     []string // at most 64
	noAdditional bool
	additional   *fastSchema
	items        *fastSchema
	enum         []string // the JSON encodings of the allowed strings; nil: no enum
	bounds       [4]*float64
	exact        [4]bool // the bound is an integer of at most 15 digits: exactly a float64
	minLen       int     // -1: none
	maxLen       int
	minItems     int
	maxItems     int
	pattern      *regexp.Regexp
	format       bool
}

// Indexes of fastSchema.bounds.
const (
	bMin = iota
	bMax
	bExMin
	bExMax
)

// compileFast returns the pre-check of a schema document, or nil when it uses a keyword the
// pre-check does not handle (the full validator then always runs).
func compileFast(doc any, root bool) *fastSchema {
	obj, ok := doc.(map[string]any)
	if !ok {
		if b, ok := doc.(bool); ok && b {
			return &fastSchema{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
		}
		return nil
	}
	f := &fastSchema{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
	for k, v := range obj {
		switch k {
		case "title", "description", "$comment", "examples", "default", "deprecated", "readOnly", "writeOnly":
		case "$schema":
			if !root || (v != "https://json-schema.org/draft/2020-12/schema" && v != "https://json-schema.org/draft/2020-12/schema#") {
				return nil
			}
		case "type":
			switch t := v.(type) {
			case string:
				if f.types |= typeBit(t); typeBit(t) == 0 {
					return nil
				}
			case []any:
				for _, x := range t {
					s, _ := x.(string)
					if typeBit(s) == 0 {
						return nil
					}
					f.types |= typeBit(s)
				}
			default:
				return nil
			}
		case "properties":
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			f.props = make(map[string]*fastSchema, len(m))
			for name, s := range m {
				if f.props[name] = compileFast(s, false); f.props[name] == nil {
					return nil
				}
			}
		case "required":
			l, ok := v.([]any)
			if !ok || len(l) > 64 {
				return nil
			}
			for _, x := range l {
				s, ok := x.(string)
				if !ok {
					return nil
				}
				f.required = append(f.required, s)
			}
		case "additionalProperties":
			if b, ok := v.(bool); ok {
				f.noAdditional = !b
			} else if f.additional = compileFast(v, false); f.additional == nil {
				return nil
			}
		case "items":
			if f.items = compileFast(v, false); f.items == nil {
				return nil
			}
		case "enum":
			l, ok := v.([]any)
			if !ok {
				return nil
			}
			f.enum = make([]string, 0, len(l))
			for _, x := range l {
				s, ok := x.(string)
				if !ok {
					return nil
				}
				b, _ := json.Marshal(s)
				f.enum = append(f.enum, string(b))
			}
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			n, ok := v.(json.Number)
			if !ok {
				return nil
			}
			x, err := strconv.ParseFloat(string(n), 64)
			if err != nil {
				return nil
			}
			i := map[string]int{"minimum": bMin, "maximum": bMax, "exclusiveMinimum": bExMin, "exclusiveMaximum": bExMax}[k]
			f.bounds[i], f.exact[i] = &x, exactInteger(string(n))
		case "minLength", "maxLength", "minItems", "maxItems":
			n, ok := v.(json.Number)
			if !ok {
				return nil
			}
			x, err := strconv.Atoi(string(n))
			if err != nil || x < 0 {
				return nil
			}
			*map[string]*int{"minLength": &f.minLen, "maxLength": &f.maxLen, "minItems": &f.minItems, "maxItems": &f.maxItems}[k] = x
		case "pattern":
			s, ok := v.(string)
			if !ok {
				return nil
			}
			re, err := regexp.Compile(s)
			if err != nil {
				return nil
			}
			f.pattern = re
		case "format":
			f.format = true
		default:
			return nil
		}
	}
	return f
}

func typeBit(t string) uint8 {
	switch t {
	case "null":
		return fNull
	case "boolean":
		return fBool
	case "integer":
		return fInt
	case "number":
		return fNum | fInt
	case "string":
		return fStr
	case "array":
		return fArr
	case "object":
		return fObj
	}
	return 0
}

// valid reports whether the JSON value b (surrounding space allowed) surely passes the
// schema; false: don't know.
func (f *fastSchema) valid(b []byte) bool {
	end, ok := f.walk(b, skipSpace(b, 0), 0)
	return ok && checkTrailing(b, end) == nil
}

// walk reads the value at b[i] once, checking it as it goes, and returns the index past it
// and whether it surely passes; it stops early at the first doubt.
func (f *fastSchema) walk(b []byte, i, depth int) (int, bool) {
	if i >= len(b) || f.format || depth >= maxDepth {
		return i, false
	}
	switch c := b[i]; {
	case c == '{':
		if (f.types != 0 && f.types&fObj == 0) || f.enum != nil {
			return i, false
		}
		return f.walkObject(b, i, depth)
	case c == '[':
		if (f.types != 0 && f.types&fArr == 0) || f.enum != nil {
			return i, false
		}
		return f.walkArray(b, i, depth)
	case c == '"':
		end, esc, err := scanString(b, i)
		if err != nil || esc || (f.types != 0 && f.types&fStr == 0) {
			return end, false
		}
		return end, f.validString(b[i:end])
	case c == 't':
		end, err := skipLiteral(b, i, "true")
		return end, err == nil && (f.types == 0 || f.types&fBool != 0) && f.enum == nil
	case c == 'f':
		end, err := skipLiteral(b, i, "false")
		return end, err == nil && (f.types == 0 || f.types&fBool != 0) && f.enum == nil
	case c == 'n':
		end, err := skipLiteral(b, i, "null")
		return end, err == nil && (f.types == 0 || f.types&fNull != 0) && f.enum == nil
	default:
		end, err := scanNumber(b, i)
		return end, err == nil && f.validNumber(b[i:end])
	}
}

func (f *fastSchema) walkObject(b []byte, i, depth int) (int, bool) {
	var seen uint64
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, len(f.required) == 0
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, false
		}
		end, esc, err := scanString(b, i)
		if err != nil || esc {
			return end, false
		}
		key := b[i+1 : end-1]
		for j, r := range f.required {
			if r == string(key) {
				seen |= 1 << j
			}
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return i, false
		}
		i = skipSpace(b, i+1)
		child := f.props[string(key)]
		switch {
		case child != nil:
		case f.noAdditional:
			return i, false
		case f.additional != nil:
			child = f.additional
		}
		var ok bool
		if child != nil {
			if i, ok = child.walk(b, i, depth+1); !ok {
				return i, false
			}
		} else if i, err = skipValue(b, i, depth+1); err != nil {
			return i, false
		}
		i = skipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return i + 1, seen == (1<<len(f.required))-1
		}
		return i, false
	}
}

func (f *fastSchema) walkArray(b []byte, i, depth int) (int, bool) {
	n := 0
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, f.minItems <= 0
	}
	for {
		var ok bool
		var err error
		if f.items != nil {
			if i, ok = f.items.walk(b, i, depth+1); !ok {
				return i, false
			}
		} else if i, err = skipValue(b, i, depth+1); err != nil {
			return i, false
		}
		n++
		i = skipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == ']' {
			return i + 1, (f.minItems < 0 || n >= f.minItems) && (f.maxItems < 0 || n <= f.maxItems)
		}
		return i, false
	}
}

// validString checks a JSON string without escapes (quotes included).
func (f *fastSchema) validString(b []byte) bool {
	s := b[1 : len(b)-1]
	if f.enum != nil {
		found := false
		for _, e := range f.enum {
			if e == string(b) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if f.minLen >= 0 || f.maxLen >= 0 {
		n := utf8.RuneCount(s)
		if (f.minLen >= 0 && n < f.minLen) || (f.maxLen >= 0 && n > f.maxLen) {
			return false
		}
	}
	return f.pattern == nil || f.pattern.Match(s)
}

func (f *fastSchema) validNumber(b []byte) bool {
	if f.enum != nil {
		return false
	}
	integer := true
	for _, c := range b {
		if c == '.' || c == 'e' || c == 'E' {
			integer = false
			break
		}
	}
	switch {
	case f.types == 0:
	case integer && f.types&fInt != 0:
	case !integer && f.types&fNum != 0:
	default:
		return false // 1.0 is an integer too: the validator decides
	}
	if f.bounds == [4]*float64{} {
		return true
	}
	x, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return false
	}
	// A value equal to a bound after rounding is the validator's to decide, unless both are
	// integers a float64 holds exactly.
	exact := integer && exactInteger(string(b))
	if m := f.bounds[bMin]; m != nil && !(x > *m || (exact && f.exact[bMin] && x == *m)) {
		return false
	}
	if m := f.bounds[bMax]; m != nil && !(x < *m || (exact && f.exact[bMax] && x == *m)) {
		return false
	}
	if m := f.bounds[bExMin]; m != nil && !(x > *m) {
		return false
	}
	if m := f.bounds[bExMax]; m != nil && !(x < *m) {
		return false
	}
	return true
}

// exactInteger reports whether the JSON number n is an integer of at most 15 digits, which a
// float64 holds exactly.
func exactInteger(n string) bool {
	if len(n) > 0 && n[0] == '-' {
		n = n[1:]
	}
	if len(n) == 0 || len(n) > 15 {
		return false
	}
	for _, c := range []byte(n) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
