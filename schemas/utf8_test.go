package schemas

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

func TestValidUTF8(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":"ok"}`:                   `{"a":"ok"}`,
		"{\"a\":\"\xff\"}":             "{\"a\":\"\uFFFD\"}",
		"{\"k\xfe\":\"x\xc3\"}":        "{\"k\uFFFD\":\"x\uFFFD\"}",
		"{\"a\":\"\xed\xa0\x80\"}":     "{\"a\":\"\uFFFD\uFFFD\uFFFD\"}", // a surrogate: three bytes, three replacements, as encoding/json
		"{\"a\":\"caf\xc3\xa9 \xe2\"}": "{\"a\":\"caf\u00e9 \uFFFD\"}",
	} {
		if got := string(ValidUTF8([]byte(in))); got != want {
			t.Errorf("ValidUTF8(%q) = %q, want %q", in, got, want)
		}
	}
	valid := []byte(`{"a":"é"}`)
	if got := ValidUTF8(valid); &got[0] != &valid[0] {
		t.Error("valid input was copied")
	}
}

// FuzzValidUTF8: the output is valid UTF-8, unchanged when the input was, and decodes as JSON
// to exactly what encoding/json makes of the input (the same replacement rule).
func FuzzValidUTF8(f *testing.F) {
	for _, s := range []string{`{"a":"ok"}`, "{\"a\":\"\xff\"}", "{\"k\xfe\":[\"x\xc3\",1]}", "\xed\xa0\x80", `"\ud800"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := ValidUTF8(in)
		if !utf8.Valid(out) {
			t.Fatalf("ValidUTF8(%q) = %q is not valid UTF-8", in, out)
		}
		if utf8.Valid(in) && !bytes.Equal(in, out) {
			t.Fatalf("valid input changed: %q -> %q", in, out)
		}
		var a, b any
		errA, errB := json.Unmarshal(in, &a), json.Unmarshal(out, &b)
		if (errA == nil) != (errB == nil) {
			t.Fatalf("JSON validity changed: %v vs %v for %q", errA, errB, in)
		}
		if errA == nil && !reflect.DeepEqual(a, b) {
			t.Fatalf("decodes differently: %v vs %v for %q", a, b, in)
		}
	})
}
