package audiences

import (
	"encoding/json"
	"testing"
)

// TestParseValStrings: a string value read without encoding/json (plainString), and one
// shared by the interner without being copied, is the value encoding/json decodes.
func TestParseValStrings(t *testing.T) {
	in := newInterner()
	in.str("gold")
	for _, raw := range []string{
		`"gold"`, ` "gold" `, `""`, `"a b"`, `"with \"quotes\""`, `"tab\there"`, `"\u00e9t\u00e9"`,
		`"été"`, "\"\x7f\"", `"\ud83d\ude00"`, `"<&>"`, `"back\\slash"`, "\"\xff\xfe\"", `"` + string(make([]byte, 40)) + `"`,
	} {
		var want string
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			want = ""
		}
		for name, got := range map[string]val{"parseVal": parseVal([]byte(raw)), "interner": in.parseVal([]byte(raw))} {
			if err := json.Unmarshal([]byte(raw), new(string)); err != nil {
				if !got.isNull() {
					t.Errorf("%s(%q) = %+v, want null", name, raw, got)
				}
				continue
			}
			if got.k != kString || got.s != want {
				t.Errorf("%s(%q) = %+v, want the string %q", name, raw, got, want)
			}
		}
	}
	if _, ok := plainString([]byte(`"a\"b"`)); ok {
		t.Error("an escaped string read as plain")
	}
}

// TestParseValInternedAllocs: a plain string value already shared costs no allocation.
func TestParseValInternedAllocs(t *testing.T) {
	in := newInterner()
	in.str("gold")
	raw := []byte(`"gold"`)
	if n := testing.AllocsPerRun(100, func() {
		if v := in.parseVal(raw); v.s != "gold" {
			t.Fatal(v)
		}
	}); n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
}
