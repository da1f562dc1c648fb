package audiences

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tributary-cdp/tributary/schemas"
)

// kind is the JSON type of a val.
type kind uint8

const (
	kNull   kind = iota // absent or null
	kString             // s
	kNumber             // f
	kBool               // f: 1 or 0
	kRaw                // an object or a list: s holds its JSON
)

// val is one JSON value of a trait or an event property, parsed once so that rules compare
// it without decoding (24 bytes + the string).
type val struct {
	k kind
	f float64
	s string
}

var null val

func strVal(s string) val  { return val{k: kString, s: s} }
func numVal(f float64) val { return val{k: kNumber, f: f} }
func boolVal(b bool) val   { return val{k: kBool, f: b2f(b)} }
func (v val) isNull() bool { return v.k == kNull }
func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// parseVal parses one JSON value (nil or "null": null).
func parseVal(raw []byte) val {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return null
	}
	switch raw[0] {
	case 'n':
		return null
	case 't':
		return boolVal(true)
	case 'f':
		return boolVal(false)
	case '"':
		if s, ok := plainString(raw); ok {
			return strVal(string(s))
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return null
		}
		return strVal(s)
	case '{', '[':
		return rawVal(raw)
	default:
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return null
		}
		return numVal(f)
	}
}

// plainString is the content of a JSON string of printable ASCII without escapes (most
// property values), which is what encoding/json would decode it to, without decoding; ok
// false for any other value.
func plainString(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	s := raw[1 : len(raw)-1]
	for _, c := range s {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return nil, false
		}
	}
	return s, true
}

// rawVal is the val of a JSON object or list (valid JSON, as encoding/json decoded it), in the
// form json.Marshal writes it to audiences.state: compact, with <, >, &, U+2028 and U+2029
// escaped. A value read back from the changelog is then equal to the one written, and one
// object sent with other spacing is the same value (mostFrequent, uniqueList).
func rawVal(raw []byte) val {
	if !slices.ContainsFunc(raw, func(c byte) bool {
		// Spacing, what HTMLEscape escapes, and the first byte of U+2028 and U+2029.
		return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '<' || c == '>' || c == '&' || c == 0xE2
	}) {
		return val{k: kRaw, s: string(raw)}
	}
	var compact, escaped bytes.Buffer
	if json.Compact(&compact, raw) != nil {
		return null
	}
	json.HTMLEscape(&escaped, compact.Bytes())
	return val{k: kRaw, s: escaped.String()}
}

// fromAny turns a config value (string, float64, bool, or an integer kind) into a val.
func fromAny(x any) val {
	switch t := x.(type) {
	case nil:
		return null
	case string:
		return strVal(t)
	case bool:
		return boolVal(t)
	case float64:
		return numVal(t)
	case float32:
		return numVal(float64(t))
	case int:
		return numVal(float64(t))
	case int64:
		return numVal(float64(t))
	case int32:
		return numVal(float64(t))
	default:
		b, _ := json.Marshal(t)
		return parseVal(b)
	}
}

// appendJSON appends v as JSON.
func (v val) appendJSON(dst []byte) []byte {
	switch v.k {
	case kString:
		return schemas.AppendJSONString(dst, v.s)
	case kNumber:
		if math.IsNaN(v.f) || math.IsInf(v.f, 0) {
			return append(dst, "null"...)
		}
		return strconv.AppendFloat(dst, v.f, 'g', -1, 64)
	case kBool:
		return strconv.AppendBool(dst, v.f != 0)
	case kRaw:
		return append(dst, v.s...)
	default:
		return append(dst, "null"...)
	}
}

// MarshalJSON and UnmarshalJSON make a val its JSON value in the changelog and the API.
func (v val) MarshalJSON() ([]byte, error) { return v.appendJSON(nil), nil }

func (v *val) UnmarshalJSON(b []byte) error {
	*v = parseVal(b)
	return nil
}

func (v val) equal(w val) bool {
	if v.k != w.k {
		return false
	}
	switch v.k {
	case kNumber, kBool:
		return v.f == w.f
	case kString, kRaw:
		return v.s == w.s
	}
	return true
}

// contains: a string holds the text, or a list holds the element.
func (v val) contains(x val) bool {
	switch v.k {
	case kString:
		return x.k == kString && strings.Contains(v.s, x.s)
	case kRaw:
		if len(v.s) == 0 || v.s[0] != '[' {
			return false
		}
		// A string that JSON writes as it is cannot be an element unless the text holds it
		// (the common answer, found without decoding the list).
		if x.k == kString && plainJSON(x.s) && !strings.Contains(v.s, x.s) {
			return false
		}
		var items []json.RawMessage
		if json.Unmarshal([]byte(v.s), &items) != nil {
			return false
		}
		for _, it := range items {
			if parseVal(it).equal(x) {
				return true
			}
		}
	}
	return false
}

// plainJSON reports whether s is written in JSON exactly as it is, between the quotes (no
// quote, backslash, control character, <, >, & or non-ASCII byte).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// comparison is a compiled schemas.Comparison.
type comparison struct {
	equals, notEquals, contains *val
	exists                      *bool
	in                          []val
	gt, gte, lt, lte            *float64
}

func compileComparison(c *schemas.Comparison) *comparison {
	out := &comparison{exists: c.Exists, gt: c.Gt, gte: c.Gte, lt: c.Lt, lte: c.Lte}
	opt := func(x any) *val {
		if x == nil {
			return nil
		}
		v := fromAny(x)
		return &v
	}
	out.equals, out.notEquals, out.contains = opt(c.Equals), opt(c.NotEquals), opt(c.Contains)
	for _, x := range c.In {
		out.in = append(out.in, fromAny(x))
	}
	return out
}

// match reports whether v satisfies every operator. An absent value satisfies only
// exists: false and notEquals; a value that is not a number satisfies no gt, gte, lt or lte.
func (c *comparison) match(v val) bool {
	if c.exists != nil && *c.exists == v.isNull() {
		return false
	}
	if c.equals != nil && !v.equal(*c.equals) {
		return false
	}
	if c.notEquals != nil && v.equal(*c.notEquals) {
		return false
	}
	if c.in != nil {
		found := false
		for _, x := range c.in {
			if v.equal(x) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if c.contains != nil && !v.contains(*c.contains) {
		return false
	}
	if c.gt != nil || c.gte != nil || c.lt != nil || c.lte != nil {
		if v.k != kNumber {
			return false
		}
		if (c.gt != nil && !(v.f > *c.gt)) || (c.gte != nil && !(v.f >= *c.gte)) ||
			(c.lt != nil && !(v.f < *c.lt)) || (c.lte != nil && !(v.f <= *c.lte)) {
			return false
		}
	}
	return true
}

// lookup returns the value at path inside a JSON object (nil, or not an object: null).
func lookup(obj json.RawMessage, path []string) val {
	cur := []byte(obj)
	for _, seg := range path {
		if len(cur) == 0 || cur[0] != '{' {
			return null
		}
		m, err := schemas.ParseMembers(cur)
		if err != nil {
			return null
		}
		next, ok := m.Get(seg)
		if !ok {
			return null
		}
		cur = bytes.TrimSpace(next)
	}
	return parseVal(cur)
}
