package schemas

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func addMessageSeeds(f *testing.F) {
	inputs, _ := filepath.Glob("testdata/messages/*.json")
	for _, in := range inputs {
		data, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		`{}`, `{"type":null}`, `{"userId":1e5,"anonymousId":-0.5}`, `{"a":"\ud83d\ude00"}`, `{"a":"\ud800"}`,
		"{\"a\":\"\xff\"}", `{"context":{"ip":"1"},"context":{}}`, `{"batch":[{"type":"track"}]}`, `[{}]`, ` {} `,
		`{"timestamp":"2026-01-02T03:04:05.5-0530"}`, `{"x":[[[[]]]]}`, `{"a":1.}`, `{"a":-}`, `{"a":tru}`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzDecodeMessage: decoding never panics, accepts nothing json.Valid rejects, and a message
// that decodes re-encodes to valid JSON that decodes to the same canonical bytes.
func FuzzDecodeMessage(f *testing.F) {
	addMessageSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeMessage(data)
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		_ = m.Validate()
		out := m.AppendJSON(nil)
		if !json.Valid(out) {
			t.Fatalf("AppendJSON wrote invalid JSON %q from %q", out, data)
		}
		m2, err := DecodeMessage(out)
		if err != nil {
			t.Fatalf("re-decoding %q: %v", out, err)
		}
		if out2 := m2.AppendJSON(nil); !bytes.Equal(out, out2) {
			t.Fatalf("round trip differs:\n%q\n%q", out, out2)
		}
		_ = m.SetContextIPIfAbsent("127.0.0.1")
		if len(m.Context) > 0 && !json.Valid(m.Context) {
			t.Fatalf("SetContextIPIfAbsent wrote invalid JSON %q", m.Context)
		}
		v, err := DecodeRoutingView(out)
		if err != nil {
			t.Fatalf("DecodeRoutingView(%q): %v", out, err)
		}
		body := AppendWebhookBodyFromEvent(nil, out, &v)
		if !json.Valid(body) {
			t.Fatalf("webhook body is invalid JSON %q", body)
		}
		if _, one, err := DecodeRoutingViewAppendBody(nil, out); err != nil || !bytes.Equal(one, body) {
			t.Fatalf("one-pass body %q (%v), want %q", one, err, body)
		}
	})
}

// FuzzDecodeBatch: decoding a batch never panics nor accepts invalid JSON, and merging its
// batch-level objects into each message keeps valid JSON.
func FuzzDecodeBatch(f *testing.F) {
	addMessageSeeds(f)
	f.Add([]byte(`{"batch":[{"type":"track","event":"E","userId":"u"}],"context":{"a":1},"integrations":{"All":false}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeBatch(data)
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		for _, raw := range b.Messages {
			m, err := DecodeMessage(raw)
			if err != nil {
				continue
			}
			// The one-pass merge (batch context + ip) means the same as the two steps.
			one := *m
			add, perr := ParseMembers(b.Context)
			mergeErr := m.MergeContext(b.Context)
			if mergeErr == nil && len(m.Context) > 0 && !json.Valid(m.Context) {
				t.Fatalf("merged context is invalid %q", m.Context)
			}
			if (perr == nil) != (mergeErr == nil) {
				t.Fatalf("ParseMembers error %v, MergeContext error %v", perr, mergeErr)
			}
			if perr == nil {
				if err := one.MergeContextMembers(add.WithStringIfAbsent("ip", "203.0.113.9")); err != nil {
					t.Fatalf("one-pass merge: %v", err)
				}
				_ = m.SetContextIPIfAbsent("203.0.113.9")
				var x, y any
				if json.Unmarshal(one.Context, &x) != nil || json.Unmarshal(m.Context, &y) != nil || !reflect.DeepEqual(x, y) {
					t.Fatalf("one-pass context %s, two steps %s", one.Context, m.Context)
				}
			}
			if m.MergeIntegrations(b.Integrations) == nil && len(m.Integrations) > 0 && !json.Valid(m.Integrations) {
				t.Fatalf("merged integrations are invalid %q", m.Integrations)
			}
		}
	})
}
