package schemas

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// jsonStringSeeds are JSON values, strings and not, with the escapes and the invalid UTF-8 whose
// decoding encoding/json defines.
var jsonStringSeeds = []string{
	`""`, `"plain"`, `"q\"uote"`, `"back\\slash"`, `"\/\b\f\n\r\t"`, `"caf\u00e9"`, `"café"`, `"\u00E9\u0000"`,
	`"\ud83d\ude00"`, `"😀"`, `"\ud800"`, `"\udc00x"`, `"\ud800\u0041"`, `"\ud83d\ud83d\ude00"`, "\"\xff\"", "\"a\xc3\"",
	"\"\xed\xa0\x80\"", `"\u2028"`, `null`, `1`, `-0.5`, `true`, `{}`, `[]`, `["a"]`,
}

// JSONString gives the text encoding/json gives, for every string; ok false for every other
// value.
func TestJSONString(t *testing.T) {
	for _, raw := range jsonStringSeeds {
		checkJSONString(t, []byte(raw))
	}
}

func checkJSONString(t *testing.T, raw []byte) {
	t.Helper()
	var want string
	wantOK := len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &want) == nil
	got, ok := JSONString(raw)
	if ok != wantOK || string(got) != want {
		t.Errorf("JSONString(%q) = %q, %v; json.Unmarshal: %q, %v", raw, got, ok, want, wantOK)
	}
}

// FuzzJSONString: for every valid JSON value, JSONString agrees with json.Unmarshal.
func FuzzJSONString(f *testing.F) {
	for _, s := range jsonStringSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) || len(raw) == 0 || raw[0] == ' ' || raw[len(raw)-1] == ' ' {
			return // EachMember gives values without surrounding space
		}
		checkJSONString(t, raw)
	})
}

// EachMember gives each member's key unescaped and its raw value, in order, repeated keys
// included; it refuses what is not one valid object, and stops at fn's error.
func TestEachMember(t *testing.T) {
	type kv struct{ K, V string }
	var got []kv
	err := EachMember([]byte(` {"a":1, "b\u0063":"x\"y" ,"a":{"n":[null]}} `), func(k, v []byte) error {
		got = append(got, kv{string(k), string(v)})
		return nil
	})
	want := []kv{{"a", "1"}, {"bc", `"x\"y"`}, {"a", `{"n":[null]}`}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("EachMember = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{``, `null`, `[]`, `"a"`, `{"a":1`, `{"a":1}x`, `{"a":01}`, "{\"a\":\"\x01\"}", `{a:1}`} {
		if err := EachMember([]byte(bad), func(_, _ []byte) error { return nil }); err == nil {
			t.Errorf("EachMember(%q): no error", bad)
		}
	}
	stop := errors.New("stop")
	n := 0
	if err := EachMember([]byte(`{"a":1,"b":2}`), func(_, _ []byte) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Errorf("EachMember with fn failing: %v after %d members, want stop after 1", err, n)
	}
}

// EachElement gives each element's raw bytes in order; it refuses what is not one valid array,
// and stops at fn's error.
func TestEachElement(t *testing.T) {
	var got []string
	err := EachElement([]byte(` [1, "a\"]" ,{"n":[null]}, [] ] `), func(v []byte) error {
		got = append(got, string(v))
		return nil
	})
	want := []string{"1", `"a\"]"`, `{"n":[null]}`, "[]"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("EachElement = %q, %v; want %q", got, err, want)
	}
	if err := EachElement([]byte(" [ ] "), func([]byte) error { t.Error("fn called for an empty array"); return nil }); err != nil {
		t.Errorf("EachElement([]): %v", err)
	}
	for _, bad := range []string{``, `null`, `{}`, `[1`, `[1,]`, `[1 2]`, `[1]x`, `[01]`, "[\"\x01\"]", `[{a:1}]`} {
		if err := EachElement([]byte(bad), func([]byte) error { return nil }); err == nil {
			t.Errorf("EachElement(%q): no error", bad)
		}
	}
	stop := errors.New("stop")
	n := 0
	if err := EachElement([]byte(`[1,2]`), func([]byte) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Errorf("EachElement with fn failing: %v after %d elements, want stop after 1", err, n)
	}
}
