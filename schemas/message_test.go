package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/webhook")

func TestDecodeMessageKeepsFreeFormBytes(t *testing.T) {
	in := `{"type":"identify","userId":"u1","traits":{"big":12345678901234567890123,"f":1.10,"e":1e400,"nested":{"a":[1,2,{"b":null}]}},"context":{"x":"\u00e9"},"_metadata":{"bundled":["Segment.io"]},"channel":"server"}`
	m, err := DecodeMessage([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(m.Traits), `{"big":12345678901234567890123,"f":1.10,"e":1e400,"nested":{"a":[1,2,{"b":null}]}}`; got != want {
		t.Errorf("traits = %s, want %s", got, want)
	}
	if got := string(m.Context); got != `{"x":"\u00e9"}` {
		t.Errorf("context = %s", got)
	}
	out := string(m.AppendJSON(nil))
	want := `{"type":"identify","userId":"u1","traits":{"big":12345678901234567890123,"f":1.10,"e":1e400,"nested":{"a":[1,2,{"b":null}]}},"context":{"x":"\u00e9"},"_metadata":{"bundled":["Segment.io"]},"channel":"server"}`
	if out != want {
		t.Errorf("AppendJSON =\n%s\nwant\n%s", out, want)
	}
	if got := string(m.Extra("channel")); got != `"server"` {
		t.Errorf("Extra(channel) = %s", got)
	}
}

func TestDecodeMessageFields(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		check    func(t *testing.T, m *Message)
	}{
		{"null ids", `{"type":"track","event":"E","userId":null,"anonymousId":"a1"}`, func(t *testing.T, m *Message) {
			if m.UserID != "" || m.AnonymousID != "a1" || m.Key() != "a1" {
				t.Errorf("ids %q %q key %q", m.UserID, m.AnonymousID, m.Key())
			}
		}},
		{"numeric user id", `{"type":"identify","userId":12345678901234567890}`, func(t *testing.T, m *Message) {
			if m.UserID != "12345678901234567890" || m.Key() != "12345678901234567890" {
				t.Errorf("userId %q", m.UserID)
			}
		}},
		{"escaped strings", `{"type":"track","event":"Caf\u00e9 \"Open\"","userId":"a\/b"}`, func(t *testing.T, m *Message) {
			if m.Event != `Café "Open"` || m.UserID != "a/b" {
				t.Errorf("event %q user %q", m.Event, m.UserID)
			}
		}},
		{"escaped key", `{"type":"track","\u0065vent":"E","userId":"u"}`, func(t *testing.T, m *Message) {
			if m.Event != "E" {
				t.Errorf("event %q", m.Event)
			}
		}},
		{"write key kept but never encoded", `{"type":"track","event":"E","userId":"u","writeKey":"wk_secret"}`, func(t *testing.T, m *Message) {
			if m.WriteKey != "wk_secret" {
				t.Errorf("writeKey %q", m.WriteKey)
			}
			if out := m.AppendJSON(nil); bytes.Contains(out, []byte("wk_secret")) {
				t.Errorf("AppendJSON leaked the write key: %s", out)
			}
		}},
		{"null objects are absent", `{"type":"track","event":"E","userId":"u","properties":null,"context":null,"timestamp":null}`, func(t *testing.T, m *Message) {
			if m.Properties != nil || m.Context != nil || !m.Timestamp.IsZero() {
				t.Errorf("got %s %s %v", m.Properties, m.Context, m.Timestamp)
			}
		}},
		{"timestamps in UTC", `{"type":"track","event":"E","userId":"u","timestamp":"2026-01-02T05:04:05.5+02:00","sentAt":"2026-01-02T03:04:06Z"}`, func(t *testing.T, m *Message) {
			if !m.Timestamp.Equal(time.Date(2026, 1, 2, 3, 4, 5, 5e8, time.UTC)) || m.Timestamp.Location() != time.UTC {
				t.Errorf("timestamp %v", m.Timestamp)
			}
			if got := string(m.AppendJSON(nil)); !strings.Contains(got, `"timestamp":"2026-01-02T03:04:05.500Z","sentAt":"2026-01-02T03:04:06.000Z"`) {
				t.Errorf("encoded %s", got)
			}
		}},
		{"surrounding space", " \n{ \"type\" : \"page\" , \"userId\" : \"u\" } \n", func(t *testing.T, m *Message) {
			if m.Type != "page" || m.UserID != "u" {
				t.Errorf("%+v", m)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeMessage([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, m)
		})
	}
}

func TestDecodeMessageErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{``, "invalid JSON at byte 0: empty input"},
		{`[]`, "a message must be a JSON object"},
		{`"track"`, "a message must be a JSON object"},
		{`{"type":"track",}`, "invalid JSON at byte 16: expected a string key"},
		{`{"type":"track"`, "invalid JSON at byte 15: unexpected end of input in an object"},
		{`{"type":"track"} x`, "invalid JSON at byte 17: data after the top-level value"},
		{`{"type":"track","properties":{"a":01}}`, "invalid JSON at byte 35: expected ',' or '}' in an object"},
		{`{"type":"track","properties":{"a":NaN}}`, "invalid JSON at byte 34: unexpected character 'N'"},
		{"{\"type\":\"tr\x01ack\"}", "invalid JSON at byte 11: control character in a string"},
		{`{"type":"track","context":{"a":"\x"}}`, "invalid JSON at byte 32: invalid escape"},
		{`{"type":7}`, "type: must be a string"},
		{`{"type":"track","event":["x"]}`, "event: must be a string"},
		{`{"type":"track","userId":true}`, "userId: must be a string"},
		{`{"type":"track","properties":[1]}`, "properties: must be an object"},
		{`{"type":"track","context":"x"}`, "context: must be an object"},
		{`{"type":"track","integrations":true}`, "integrations: must be an object"},
		{`{"type":"track","timestamp":"yesterday"}`, `timestamp: "yesterday" is not an ISO 8601 date-time such as 2026-01-02T15:04:05.123Z`},
		{`{"type":"track","sentAt":5}`, "sentAt: must be a string"},
		{`{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`, "invalid JSON at byte 132: nested too deeply"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, err := DecodeMessage([]byte(tc.in))
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("DecodeMessage(%q) = %v, want a *DecodeError", tc.in, err)
			}
			if err.Error() != tc.want {
				t.Errorf("DecodeMessage(%q) error = %q, want %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	long := strings.Repeat("x", 101)
	for _, tc := range []struct{ in, want string }{
		{`{"type":"track","event":"E","userId":"u"}`, ""},
		{`{"type":"track","event":"E","anonymousId":"a"}`, ""},
		{`{"type":"page","anonymousId":"a"}`, ""},
		{`{"type":"screen","userId":"u"}`, ""},
		{`{"type":"identify","userId":"u"}`, ""},
		{`{"type":"group","groupId":"g","anonymousId":"a"}`, ""},
		{`{"type":"alias","userId":"u","previousId":"p"}`, ""},
		{`{"type":"track","event":"E","userId":"u","messageId":"` + long[:100] + `"}`, ""},
		{`{"userId":"u"}`, "type: required"},
		{`{"type":"delete","userId":"u"}`, `type: unknown type "delete" (want identify, track, page, screen, group or alias)`},
		{`{"type":"Track","userId":"u"}`, `type: unknown type "Track" (want identify, track, page, screen, group or alias)`},
		{`{"type":"identify"}`, "userId: userId or anonymousId is required"},
		{`{"type":"page","userId":null,"anonymousId":null}`, "userId: userId or anonymousId is required"},
		{`{"type":"screen"}`, "userId: userId or anonymousId is required"},
		{`{"type":"track","userId":"u"}`, "event: required"},
		{`{"type":"track"}`, "userId: userId or anonymousId is required; event: required"},
		{`{"type":"group","userId":"u"}`, "groupId: required"},
		{`{"type":"alias","userId":"u"}`, "previousId: required"},
		{`{"type":"alias","previousId":"p","anonymousId":"a"}`, "userId: required"},
		{`{"type":"alias"}`, "userId: required; previousId: required"},
		{`{"type":"track","event":"E","userId":"u","messageId":"` + long + `"}`, "messageId: longer than 100 characters"},
		// messageId becomes the X-Message-Id header of every webhook (docs/ingest.md#request-format).
		{`{"type":"track","event":"E","userId":"u","messageId":"order 1 – é"}`, ""},
		{`{"type":"track","event":"E","userId":"u","messageId":"p1\u0007"}`, "messageId: must not contain control characters (found U+0007 at byte 2): it is sent as the X-Message-Id header of every webhook"},
		{`{"type":"track","event":"E","userId":"u","messageId":"x\r\nX-Injected: 1"}`, "messageId: must not contain control characters (found U+000D at byte 1): it is sent as the X-Message-Id header of every webhook"},
		{`{"type":"track","event":"E","userId":"u","messageId":"a\tb"}`, "messageId: must not contain control characters (found U+0009 at byte 1): it is sent as the X-Message-Id header of every webhook"},
		{`{"type":"track","event":"E","userId":"u","messageId":"\u0000"}`, "messageId: must not contain control characters (found U+0000 at byte 0): it is sent as the X-Message-Id header of every webhook"},
		{`{"type":"track","event":"E","userId":"u","messageId":"m\u007f"}`, "messageId: must not contain control characters (found U+007F at byte 1): it is sent as the X-Message-Id header of every webhook"},
		{`{"type":"track","event":"E","userId":"u","messageId":"dd-1 "}`, "messageId: must not begin or end with a space: it is sent as the X-Message-Id header of every webhook, where HTTP drops them"},
		{`{"type":"track","event":"E","userId":"u","messageId":" dd-1"}`, "messageId: must not begin or end with a space: it is sent as the X-Message-Id header of every webhook, where HTTP drops them"},
		{`{"type":"track","userId":"u","messageId":"p\n"}`, "event: required; messageId: must not contain control characters (found U+000A at byte 1): it is sent as the X-Message-Id header of every webhook"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			m, err := DecodeMessage([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			err = m.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || err.Error() != tc.want {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestParseTimestamp(t *testing.T) {
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
	}{
		{"2026-01-02T03:04:05Z", base},
		{"2026-01-02T03:04:05.1Z", base.Add(100 * time.Millisecond)},
		{"2026-01-02T03:04:05.12Z", base.Add(120 * time.Millisecond)},
		{"2026-01-02T03:04:05.123Z", base.Add(123 * time.Millisecond)},
		{"2026-01-02T03:04:05.123456Z", base.Add(123456 * time.Microsecond)},
		{"2026-01-02T03:04:05.123456789Z", base.Add(123456789)},
		{"2026-01-02T05:04:05+02:00", base},
		{"2026-01-01T21:34:05.250-05:30", base.Add(250 * time.Millisecond)},
		{"2026-01-02T05:04:05+0200", base},
		{"2026-01-01T21:34:05.5-0530", base.Add(500 * time.Millisecond)},
		{"2026-01-02T03:04:05.000000001+0000", base.Add(1)},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseTimestamp(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tc.want) || got.Location() != time.UTC {
				t.Errorf("ParseTimestamp(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
	for _, bad := range []string{"", "2026-01-02", "2026-01-02 03:04:05Z", "2026-01-02T03:04:05", "2026-01-02T03:04:05.1234567890Z", "2026-13-02T03:04:05Z", "2026-01-02T03:04:05+2", "1735787045"} {
		if _, err := ParseTimestamp(bad); err == nil {
			t.Errorf("ParseTimestamp(%q): want an error", bad)
		}
	}
}

func TestFormatTimestamp(t *testing.T) {
	for _, tc := range []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), "2026-01-02T03:04:05.000Z"},
		{time.Date(2026, 1, 2, 3, 4, 5, 123999999, time.UTC), "2026-01-02T03:04:05.123Z"},
		{time.Date(2026, 1, 2, 5, 4, 5, 7e6, time.FixedZone("", 7200)), "2026-01-02T03:04:05.007Z"},
		{time.Date(999, 12, 31, 23, 59, 59, 0, time.UTC), "0999-12-31T23:59:59.000Z"},
	} {
		if got := FormatTimestamp(tc.in); got != tc.want {
			t.Errorf("FormatTimestamp(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestMerges(t *testing.T) {
	m, err := DecodeMessage([]byte(`{"type":"track","event":"E","userId":"u","context":{"ip":"1.2.3.4","locale":"fr"},"integrations":{"Webhooks":false}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.MergeContext(json.RawMessage(`{"locale":"en","library":{"name":"x","version":"1"}}`)); err != nil {
		t.Fatal(err)
	}
	if got := string(m.Context); got != `{"ip":"1.2.3.4","locale":"fr","library":{"name":"x","version":"1"}}` {
		t.Errorf("context = %s", got)
	}
	if err := m.MergeIntegrations(json.RawMessage(`{"All":false,"Webhooks":true}`)); err != nil {
		t.Fatal(err)
	}
	if got := string(m.Integrations); got != `{"Webhooks":false,"All":false}` {
		t.Errorf("integrations = %s", got)
	}
	// A message without its own object takes the batch-level one.
	m2, _ := DecodeMessage([]byte(`{"type":"page","userId":"u"}`))
	_ = m2.MergeContext(json.RawMessage(`{"a":1}`))
	_ = m2.MergeContext(nil)
	if string(m2.Context) != `{"a":1}` {
		t.Errorf("context = %s", m2.Context)
	}
	if err := m2.MergeContext(json.RawMessage(`[1]`)); err == nil {
		t.Error("merging an array: want an error")
	}
}

func TestSetContextIPIfAbsent(t *testing.T) {
	for _, tc := range []struct{ ctx, want string }{
		{``, `{"ip":"10.0.0.1"}`},
		{`{}`, `{"ip":"10.0.0.1"}`},
		{`{ }`, `{ "ip":"10.0.0.1"}`},
		{`{"ip":"8.8.8.8"}`, `{"ip":"8.8.8.8"}`},
		{`{"library":{"name":"a"}}`, `{"library":{"name":"a"},"ip":"10.0.0.1"}`},
	} {
		m := &Message{Type: "track", Context: json.RawMessage(tc.ctx)}
		if tc.ctx == "" {
			m.Context = nil
		}
		if err := m.SetContextIPIfAbsent("10.0.0.1"); err != nil {
			t.Fatal(err)
		}
		if string(m.Context) != tc.want {
			t.Errorf("context %q → %s, want %s", tc.ctx, m.Context, tc.want)
		}
	}
}

func TestDecodeBatch(t *testing.T) {
	b, err := DecodeBatch([]byte(`{"batch":[{"type":"track","event":"A","userId":"u"}, {"type":"identify"} ],"sentAt":"2026-01-02T03:04:05Z","context":{"ip":"1.1.1.1"},"integrations":{"All":false},"writeKey":"wk","messageId":"b1","_unknown":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Messages) != 2 || string(b.Messages[1]) != `{"type":"identify"}` {
		t.Fatalf("messages %q", b.Messages)
	}
	if b.WriteKey != "wk" || b.MessageID != "b1" || string(b.Context) != `{"ip":"1.1.1.1"}` || string(b.Integrations) != `{"All":false}` || b.SentAt.IsZero() {
		t.Errorf("batch %+v", b)
	}
	for _, tc := range []struct{ in, want string }{
		{`{}`, "batch: required"},
		{`{"batch":{}}`, "batch: must be an array"},
		{`{"batch":[1]}`, "batch: every element must be an object"},
		{`{"batch":[{}`, "invalid JSON at byte 12: unexpected end of input in an array"},
		{`[]`, "a batch must be a JSON object"},
	} {
		if _, err := DecodeBatch([]byte(tc.in)); err == nil || err.Error() != tc.want {
			t.Errorf("DecodeBatch(%s) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

// TestWebhookGolden renders the delivered body of each testdata/messages input; -update
// rewrites testdata/webhook.
func TestWebhookGolden(t *testing.T) {
	inputs, _ := filepath.Glob("testdata/messages/*.json")
	if len(inputs) < 6 {
		t.Fatalf("found %d inputs", len(inputs))
	}
	check := func(t *testing.T, name string, got []byte) {
		t.Helper()
		if !json.Valid(got) {
			t.Fatalf("invalid JSON: %s", got)
		}
		var pretty bytes.Buffer
		_ = json.Indent(&pretty, got, "", "  ")
		pretty.WriteByte('\n')
		golden := filepath.Join("testdata", "webhook", name)
		if *update {
			if err := os.WriteFile(golden, pretty.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(pretty.Bytes(), want) {
			t.Errorf("%s:\n%s\nwant\n%s", name, pretty.Bytes(), want)
		}
	}
	for _, in := range inputs {
		name := filepath.Base(in)
		t.Run(name, func(t *testing.T) {
			data, _ := os.ReadFile(in)
			m, err := DecodeMessage(data)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			body := AppendWebhookBody(nil, m)
			check(t, name, body)
			// The router's fast path gives the same bytes.
			event := m.AppendJSON(nil)
			v, err := DecodeRoutingView(event)
			if err != nil {
				t.Fatal(err)
			}
			if fast := AppendWebhookBodyFromEvent(nil, event, &v); !bytes.Equal(fast, body) {
				t.Errorf("fast path differs:\n%s\n%s", fast, body)
			}
			v1, one, err := DecodeRoutingViewAppendBody([]byte("prefix"), event)
			if err != nil || string(one) != "prefix"+string(body) || v1.Type != v.Type || v1.UserID != v.UserID || v1.MessageID != v.MessageID {
				t.Errorf("one-pass path differs (err %v):\n%s\n%s", err, one, body)
			}
			var decoded map[string]any
			_ = json.Unmarshal(body, &decoded)
			if decoded["version"] != float64(1) || decoded["type"] != m.Type {
				t.Errorf("version/type: %v %v", decoded["version"], decoded["type"])
			}
			if m.Type == TypeAlias && (decoded["Previous ID"] != m.PreviousID || decoded["User ID"] != m.UserID || decoded["previousId"] != m.PreviousID) {
				t.Errorf("alias keys: %v", decoded)
			}
			if ts, _ := decoded["timestamp"].(string); len(ts) != 24 || !strings.HasSuffix(ts, "Z") {
				t.Errorf("timestamp %q", ts)
			}
		})
	}
	t.Run("delete.json", func(t *testing.T) {
		body := AppendDeleteBody(nil, "97980cfea0067", time.Date(2026, 2, 3, 4, 5, 6, 789e6, time.UTC))
		if bytes.Contains(body, []byte("version")) {
			t.Errorf("delete carries a version: %s", body)
		}
		check(t, "delete.json", body)
	})
}

func TestRoutingView(t *testing.T) {
	ev := []byte(`{"type":"alias","messageId":"m1","userId":"u2","anonymousId":"a","previousId":"u1","event":"x","integrations":{"All":false},"version":7,"User ID":"spoof"}`)
	v, err := DecodeRoutingView(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := RoutingView{Type: "alias", Event: "x", MessageID: "m1", UserID: "u2", AnonymousID: "a", PreviousID: "u1", Integrations: json.RawMessage(`{"All":false}`)}
	if v.Type != want.Type || v.Event != want.Event || v.MessageID != want.MessageID || v.UserID != want.UserID || v.AnonymousID != want.AnonymousID || v.PreviousID != want.PreviousID || string(v.Integrations) != string(want.Integrations) {
		t.Errorf("view %+v", v)
	}
	body := AppendWebhookBodyFromEvent(nil, ev, &v)
	want2 := `{"version":1,"type":"alias","messageId":"m1","userId":"u2","anonymousId":"a","previousId":"u1","event":"x","integrations":{"All":false},"Previous ID":"u1","User ID":"u2"}`
	if string(body) != want2 {
		t.Errorf("body\n%s\nwant\n%s", body, want2)
	}
	if _, err := DecodeRoutingView([]byte(`{"type":`)); err == nil {
		t.Error("truncated event: want an error")
	}
	if _, got, err := DecodeRoutingViewAppendBody([]byte("keep"), []byte(`{"type":`)); err == nil || string(got) != "keep" {
		t.Errorf("truncated event: %q, %v; want dst unchanged and an error", got, err)
	}
	for _, c := range []struct{ in, want string }{
		{`{"type":"delete","userId":"u","timestamp":"t"}`, `{"type":"delete","userId":"u","timestamp":"t"}`},
		{`{"type":"delete","version":1}`, `{"type":"delete"}`},
		{`{}`, `{"version":1}`},
	} {
		v, _ := DecodeRoutingView([]byte(c.in))
		two := AppendWebhookBodyFromEvent(nil, []byte(c.in), &v)
		_, one, err := DecodeRoutingViewAppendBody(nil, []byte(c.in))
		if err != nil || string(one) != c.want || string(two) != c.want {
			t.Errorf("%s: one pass %s (%v), two passes %s; want %s", c.in, one, err, two, c.want)
		}
	}
}

// The string scanner's 8-byte fast path must still stop at every quote, backslash and control
// character, wherever it falls in a word.
func TestScanStringFastPathBoundaries(t *testing.T) {
	for n := 0; n < 24; n++ {
		plain := strings.Repeat("aé", n)[:n+n/2] // ASCII and UTF-8 bytes
		for _, c := range []struct {
			insert string
			valid  bool
		}{{"\x01", false}, {"\x1f", false}, {`\"`, true}, {`\\`, true}, {`\u00e9`, true}, {"\x7f", true}, {`\x`, false}} {
			doc := `{"type":"track","userId":"u","event":"` + plain + c.insert + plain + `"}`
			_, err := DecodeMessage([]byte(doc))
			if (err == nil) != c.valid || json.Valid([]byte(doc)) != c.valid {
				t.Fatalf("%q: err %v, want valid=%v (encoding/json says %v)", doc, err, c.valid, json.Valid([]byte(doc)))
			}
		}
	}
}

func TestMergeContextMembersEqualsTwoSteps(t *testing.T) {
	for _, c := range []struct{ own, batch, want string }{
		{``, ``, `{"ip":"1.2.3.4"}`},
		{``, `{"a":1}`, `{"a":1,"ip":"1.2.3.4"}`},
		{`{"ip":"9.9.9.9"}`, `{"a":1}`, `{"ip":"9.9.9.9","a":1}`},
		{`{"a":2}`, `{"a":1,"b":true}`, `{"a":2,"b":true,"ip":"1.2.3.4"}`},
		{`{}`, `{"ip":"8.8.8.8"}`, `{"ip":"8.8.8.8"}`},
		{`{"library":{"name":"x"}}`, `null`, `{"library":{"name":"x"},"ip":"1.2.3.4"}`},
	} {
		msg := `{"type":"identify","userId":"u"`
		if c.own != "" {
			msg += `,"context":` + c.own
		}
		m, err := DecodeMessage([]byte(msg + "}"))
		if err != nil {
			t.Fatal(err)
		}
		two := *m
		add, err := ParseMembers(json.RawMessage(c.batch))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.MergeContextMembers(add.WithStringIfAbsent("ip", "1.2.3.4")); err != nil || string(m.Context) != c.want {
			t.Errorf("own %s batch %s: one pass %s (%v), want %s", c.own, c.batch, m.Context, err, c.want)
		}
		_ = two.MergeContext(json.RawMessage(c.batch))
		_ = two.SetContextIPIfAbsent("1.2.3.4")
		if string(two.Context) != c.want {
			t.Errorf("own %s batch %s: two steps %s, want %s", c.own, c.batch, two.Context, c.want)
		}
	}
	if _, err := ParseMembers(json.RawMessage(`[1]`)); err == nil || err.Error() != "batch-level value must be an object" {
		t.Errorf("array batch context: %v", err)
	}
}

func TestWithoutMember(t *testing.T) {
	for in, want := range map[string]string{
		`{"writeKey":"s","type":"track"}`:                    `{"type":"track"}`,
		`{"type":"track","writeKey":"s","a":{"writeKey":1}}`: `{"type":"track","a":{"writeKey":1}}`,
		`{"write\u004bey":"s"}`:                              `{}`,
		`{"type":"track"}`:                                   `{"type":"track"}`,
		`not json, "writeKey":"s"`:                           `not json, "writeKey":"s"`,
	} {
		if got := string(WithoutMember([]byte(in), "writeKey")); got != want {
			t.Errorf("WithoutMember(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestMembersGetAndEach(t *testing.T) {
	x, err := ParseMembers(json.RawMessage(`{"a":1,"b\u0041":{"c":[1,2]},"a":"last"}`))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := x.Get("a"); !ok || string(v) != `"last"` {
		t.Errorf(`Get("a") = %s %v, want the last "a"`, v, ok)
	}
	if v, ok := x.Get("bA"); !ok || string(v) != `{"c":[1,2]}` {
		t.Errorf(`Get("bA") = %s %v`, v, ok)
	}
	if _, ok := x.Get("z"); ok {
		t.Error(`Get("z") found a member`)
	}
	var keys []string
	x.Each(func(k string, _ json.RawMessage) { keys = append(keys, k) })
	if strings.Join(keys, ",") != "a,bA,a" {
		t.Errorf("Each: %v", keys)
	}
}
