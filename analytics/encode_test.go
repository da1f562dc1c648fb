package analytics

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

type point struct {
	X, Y int
}

// The encoder must produce what encoding/json would, value for value.
func TestEncoderMatchesEncodingJSON(t *testing.T) {
	when := time.Date(2024, 5, 1, 10, 0, 0, 123456789, time.FixedZone("x", 3600))
	values := map[string]any{
		"nil": nil, "s": "plain", "esc": "quote\" back\\ nl\n tab\t ctl\x01 <html>&", "uni": "é 日本 \u2028\u2029 😀",
		"bad utf8": "a\xffb", "t": true, "f": false,
		"int": -42, "int8": int8(-8), "int16": int16(16), "int32": int32(-32), "int64": int64(math.MaxInt64),
		"uint": uint(7), "uint8": uint8(8), "uint16": uint16(16), "uint32": uint32(32), "uint64": uint64(math.MaxUint64),
		"f64": 9.99, "f64 big": 1e21, "f64 small": 1e-7, "f64 zero": 0.0, "f64 neg": -123.456e-10, "f32": float32(3.14), "f32 small": float32(1e-7),
		"num": json.Number("12.5e3"), "raw": json.RawMessage(`{"a":[1,2]}`),
		"map":  map[string]any{"b": 1, "a": []any{"x", 2.5, nil, map[string]any{"deep": true}}},
		"smap": map[string]string{"z": "1", "a": "2"}, "strs": []string{"a", "b\"c"},
		"struct": point{1, 2}, "ptr": &point{3, 4}, "ints": []int{1, 2, 3},
		"integrations": Integrations{"All": false},
		"":             "empty key",
	}
	e := &encoder{limit: 1 << 20}
	if err := e.object(values, 1); err != nil {
		t.Fatal(err)
	}
	if !json.Valid(e.buf) {
		t.Fatalf("invalid JSON: %s", e.buf)
	}
	withTime := map[string]any{"when": when}
	e2 := &encoder{limit: 1 << 20}
	if err := e2.object(withTime, 1); err != nil {
		t.Fatal(err)
	}
	if string(e2.buf) != `{"when":"2024-05-01T09:00:00.123Z"}` {
		t.Fatalf("time.Time encoded as %s", e2.buf)
	}

	var got, want any
	if err := json.Unmarshal(e.buf, &got); err != nil {
		t.Fatal(err)
	}
	ref, err := json.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(ref, &want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("encoder and encoding/json differ:\n%s\n%s", e.buf, ref)
	}
	// Numbers byte for byte (DeepEqual above compares them as float64).
	for _, k := range []string{"f64", "f64 big", "f64 small", "f64 neg", "f32", "f32 small", "uint64", "int64"} {
		ee := &encoder{limit: 1 << 10}
		_ = ee.value(values[k], 1)
		r, _ := json.Marshal(values[k])
		if !bytes.Equal(ee.buf, r) {
			t.Errorf("%s: %s, encoding/json writes %s", k, ee.buf, r)
		}
	}
	// Keys are sorted, so payloads are stable.
	if !bytes.HasPrefix(e.buf, []byte(`{"":"empty key","bad utf8":`)) {
		t.Fatalf("keys not sorted: %.40s", e.buf)
	}
}

func TestEncoderRefusesCyclesAndOversize(t *testing.T) {
	cyc := map[string]any{}
	cyc["self"] = cyc
	e := &encoder{limit: MaxMessageBytes}
	if err := e.object(cyc, 1); err == nil || !strings.Contains(err.Error(), "nested") {
		t.Fatalf("a map containing itself: %v", err)
	}
	huge := map[string]any{}
	for i := range 10000 {
		huge[strings.Repeat("k", 10)+string(rune('a'+i%26))+string(rune(i))] = strings.Repeat("v", 100)
	}
	e = &encoder{limit: MaxMessageBytes}
	id := [16]byte{}
	err := e.encodeMessage(&Track{UserId: "u", Event: "e", Properties: huge}, &id, time.Now())
	if err == nil || !err.tooLarge {
		t.Fatalf("a 1 MB message: %v, want the size refusal", err)
	}
	if len(e.buf) > 2*MaxMessageBytes {
		t.Fatalf("the encoder wrote %d bytes before noticing the limit", len(e.buf))
	}
}

func TestValidTimestamp(t *testing.T) {
	for s, ok := range map[string]bool{
		"2024-05-01T10:00:00Z": true, "2024-05-01T10:00:00.123Z": true, "2024-05-01T10:00:00.123456789+02:00": true,
		"2024-05-01T10:00:00.1-0700": true, "2024-05-01": false, "yesterday": false, "": false,
		"2024-05-01T10:00:00.1234567890Z": false, "2024-05-01T10:00:00Z\"": false,
	} {
		if validTimestamp(s) != ok {
			t.Errorf("validTimestamp(%q) = %v", s, !ok)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a", "\"\\", "\x00\x1f", "\xff", "é\u2028", "<>&"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendString(nil, s)
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q encoded as invalid JSON %s: %v", s, b, err)
		}
		want := strings.ToValidUTF8(s, "\ufffd")
		if utf8.ValidString(s) && got != s || !utf8.ValidString(s) && got != decodeLikeJSON(s) {
			t.Fatalf("%q round-tripped as %q (want %q)", s, got, want)
		}
	})
}

// decodeLikeJSON is what encoding/json yields for a string with invalid UTF-8: each bad byte
// becomes U+FFFD.
func decodeLikeJSON(s string) string {
	r, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(r, &out)
	return out
}

func TestMessageIDs(t *testing.T) {
	e := &encoder{}
	seen := map[uuid.UUID]bool{}
	for range 10_000 {
		id, err := e.newMessageID()
		if err != nil {
			t.Fatal(err)
		}
		if id.Version() != 4 || id.Variant() != uuid.RFC4122 || seen[id] {
			t.Fatalf("%s: version %d, variant %s, seen before %v", id, id.Version(), id.Variant(), seen[id])
		}
		seen[id] = true
		if got := string(appendUUID(nil, (*[16]byte)(&id))); got != id.String() {
			t.Fatalf("appendUUID wrote %s, want %s", got, id)
		}
	}
}
