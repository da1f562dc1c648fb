package console

import (
	"bytes"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/schemas"
)

// The views decode only the members of a record they keep (docs/benchmarks.md#console): they
// walk its members with the scanner ingest and router use (schemas.EachMember) in place of
// json.Unmarshal into a full struct, and get what json.Unmarshal would give, record by record:
// a key matches a field exactly, else case-insensitively; the last of a repeated key wins; null
// leaves a field as it is; a value of the wrong type makes the record unreadable. What the lean
// path cannot decide as encoding/json would (errUnsure: a record the scanner refuses, a
// non-ASCII key that is not a field's name) goes to json.Unmarshal, which decides.

var (
	// errUnsure sends a record to json.Unmarshal.
	errUnsure = errors.New("decoded by encoding/json")
	// errWrongType is a member whose value json.Unmarshal refuses for its field.
	errWrongType = errors.New("a member of the wrong type")
)

// fieldIndex returns which of names the member key stands for, as encoding/json matches a key
// to a struct field: the exact name, else the name equal to it under case folding; -1 for none.
// A non-ASCII key that is no name is errUnsure: encoding/json folds some non-ASCII letters to
// ASCII ones (the Kelvin sign to k), by its own rule.
func fieldIndex(key []byte, names []string) (int, error) {
	return fieldIndexFrom(key, names, 0)
}

// fieldIndexFrom is fieldIndex, trying names[hint] first: a reader of records whose members
// come in names' order (as the deliverer writes them) passes the index after the last one it
// matched, and finds each next member at the first compare.
func fieldIndexFrom(key []byte, names []string, hint int) (int, error) {
	if hint >= 0 && hint < len(names) && string(key) == names[hint] {
		return hint, nil
	}
	for i, n := range names {
		if string(key) == n {
			return i, nil
		}
	}
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return -1, errUnsure
		}
	}
	for i, n := range names {
		if len(key) == len(n) && bytes.EqualFold(key, []byte(n)) {
			return i, nil
		}
	}
	return -1, nil
}

// decodeString decodes v into *dst as json.Unmarshal into a string field: the text of a string,
// null leaving *dst as it is. *dst may alias v.
func decodeString(v []byte, dst *[]byte) error {
	if s, ok := schemas.JSONString(v); ok {
		*dst = s
		return nil
	}
	if string(v) == "null" {
		return nil
	}
	return errWrongType
}

// decodeStringMap decodes v into *dst as json.Unmarshal into a map[string]string field: the
// members of an object added to the map (made when nil), null leaving *dst as it is.
func decodeStringMap(v []byte, dst *map[string]string) error {
	if string(v) == "null" {
		return nil
	}
	if len(v) == 0 || v[0] != '{' {
		return errWrongType
	}
	m := *dst
	if m == nil {
		m = map[string]string{}
	}
	err := schemas.EachMember(v, func(key, val []byte) error {
		var s []byte
		if err := decodeString(val, &s); err != nil {
			return err
		}
		m[string(key)] = string(s) // null: "", as json.Unmarshal stores it
		return nil
	})
	if err != nil {
		return err
	}
	*dst = m
	return nil
}

// decodeInt decodes v into *dst as json.Unmarshal into an int field (64 bits).
func decodeInt(v []byte, dst *int) error {
	if string(v) == "null" {
		return nil
	}
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return errWrongType
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil { // a fraction, an exponent, or out of range
		return errWrongType
	}
	*dst = int(n)
	return nil
}

// decodeFloat decodes v into *dst as json.Unmarshal into a float64 field.
func decodeFloat(v []byte, dst *float64) error {
	if string(v) == "null" {
		return nil
	}
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return errWrongType
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil { // out of range
		return errWrongType
	}
	*dst = f
	return nil
}

// decodeBool decodes v into *dst as json.Unmarshal into a bool field.
func decodeBool(v []byte, dst *bool) error {
	switch string(v) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	case "null":
	default:
		return errWrongType
	}
	return nil
}

// interner shares one string among the records that repeat a value: views.Interner.
type interner = views.Interner
