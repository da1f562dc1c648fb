package schemas_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestAuditStateHashesSecrets: every secret of an object (a destination's shared secrets, its
// header values, a URL's credentials; a source's write key and its hashes) is replaced by its
// digest in the audit trail's before and after, the rest kept as it is.
func TestAuditStateHashesSecrets(t *testing.T) {
	src := &schemas.Source{ID: "web", Name: "Web", WriteKey: "wk_plain_0123456789", PreviousWriteKeyHash: "sha256:abcdef0123456789"}
	dst := &schemas.Destination{ID: "hooks", Name: "Hooks", Type: schemas.DestinationTypeWebhooks, Sources: []string{"web"},
		Settings: schemas.DestinationSettings{SharedSecret: "shared-0123456789", PreviousSharedSecret: "previous-0123456789",
			Webhooks: []schemas.Webhook{{URL: "https://user:pass@h.example.com/in?token=tok-0123456789", Headers: map[string]string{"Authorization": "Bearer hdr-0123456789", "X-Team": "growth"}}}}}
	for _, tc := range []struct {
		name    string
		v       any
		secrets []string
		want    []string
	}{
		{"source", src, []string{"wk_plain_0123456789", "abcdef0123456789"},
			[]string{`"name":"Web"`, `"writeKey":"` + schemas.HashSecret("wk_plain_0123456789") + `"`, `"previousWriteKeyHash":"sha256:`}},
		{"destination", dst, []string{"shared-0123456789", "previous-0123456789", "pass", "tok-0123456789", "hdr-0123456789", "growth"},
			[]string{`"name":"Hooks"`, `"sharedSecret":"` + schemas.HashSecret("shared-0123456789") + `"`, `"Authorization":"` + schemas.HashSecret("Bearer hdr-0123456789") + `"`,
				`"X-Team":"` + schemas.HashSecret("growth") + `"`, `h.example.com`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := schemas.AuditState(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.secrets {
				if strings.Contains(string(got), s) {
					t.Errorf("%s holds the secret %q", got, s)
				}
			}
			for _, s := range tc.want {
				if !strings.Contains(string(got), s) {
					t.Errorf("%s lacks %s", got, s)
				}
			}
		})
	}
	if got, _ := schemas.AuditState(nil); got != nil {
		t.Errorf("AuditState(nil) = %s, want nil", got)
	}
	if h := schemas.HashSecret("x"); !strings.HasPrefix(h, "sha256:") || len(h) != len("sha256:")+12 || schemas.HashSecret("") != "" {
		t.Errorf("HashSecret: %q", h)
	}
}

// TestAuditRecordRoundTrip: a record decodes as written; a record of a later version with a field
// this build does not know still decodes; a record without its required fields does not.
func TestAuditRecordRoundTrip(t *testing.T) {
	rec := schemas.AuditRecord{V: schemas.AuditVersion, ID: "0b8f7a4e-5f0e-4a55-9c39-0d1c3f8f6c11", Time: "2026-01-02T03:04:05.678Z",
		Actor: schemas.AuditActor{Name: "ana@example.com", Role: "editor", Kind: schemas.ActorUser}, Action: "source.update",
		Object: schemas.AuditObject{Kind: "source", ID: "web"}, Before: json.RawMessage(`{"name":"A"}`), After: json.RawMessage(`{"name":"B"}`),
		From: schemas.AuditFrom{IP: "10.0.0.1", UserAgent: "curl/8"}, Result: schemas.AuditResult{Status: schemas.AuditOK}}
	b, err := json.Marshal(&rec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := schemas.DecodeAuditRecord(b)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := json.Marshal(&got); string(again) != string(b) {
		t.Errorf("round trip: %s, want %s", again, b)
	}
	later := strings.Replace(string(b), `"v":1`, `"v":2,"session":"s1"`, 1)
	if _, err := schemas.DecodeAuditRecord([]byte(later)); err != nil {
		t.Errorf("a later version: %v", err)
	}
	_, err = schemas.DecodeAuditRecord([]byte(`{"v":0,"time":"yesterday","result":{"status":"maybe"}}`))
	for _, want := range []string{"v: must be at least 1", "id: required", "time:", "action: required", "actor.kind: required", `result.status: must be "ok" or "refused", got "maybe"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
}

// TestAuditRecordEncodeOmitsLargeStates: a record whose before and after together pass
// AuditMaxBytes keeps their sizes and digests instead; a smaller one keeps them whole.
func TestAuditRecordEncodeOmitsLargeStates(t *testing.T) {
	state := json.RawMessage(`{"description":"` + strings.Repeat("a", 600_000) + `"}`)
	rec := schemas.AuditRecord{V: 1, ID: "x", Time: "2026-01-02T03:04:05.678Z", Actor: schemas.AuditActor{Kind: schemas.ActorSystem},
		Action: "tracking-plan.update", Before: state, After: state, Result: schemas.AuditResult{Status: schemas.AuditOK}}
	b, err := rec.Encode()
	if err != nil || len(b) > schemas.AuditMaxBytes {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	want := `"before":{"bytes":600018,"omitted":"too large for an audit record","sha256":"` + schemas.HashSecret(string(state)) + `"}`
	if !strings.Contains(string(b), want) {
		t.Errorf("%s, want %s", b, want)
	}
	rec.Before, rec.After = json.RawMessage(`{"a":1}`), nil
	if b, _ := rec.Encode(); !strings.Contains(string(b), `"before":{"a":1}`) {
		t.Errorf("a small record: %s", b)
	}
}
