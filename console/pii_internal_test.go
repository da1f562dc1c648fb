package console

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestPIIMaskStable: a masked id is a short hash, equal for equal ids and under every mask of
// one console token, different for different ids and under another token; "" stays "".
func TestPIIMaskStable(t *testing.T) {
	s1, s2 := &Service{cfg: Config{Token: "token-one-0123456789"}}, &Service{cfg: Config{Token: "token-two-0123456789"}}
	r := httptest.NewRequest(http.MethodGet, "/", nil) // no principal: masked
	a, b, other := s1.maskOf(r), s1.maskOf(r), s2.maskOf(r)
	id := a.id(idUser, "u-planted")
	if !strings.HasPrefix(id, "user:") || len(id) != len("user:")+piiHashLen || strings.Contains(id, "planted") {
		t.Fatalf("masked id %q", id)
	}
	if b.id(idUser, "u-planted") != id {
		t.Fatal("the same id hashed twice differs")
	}
	if a.id(idUser, "u-other") == id || other.id(idUser, "u-planted") == id {
		t.Fatal("another id, or another console token, hashes alike")
	}
	if a.id(idUser, "") != "" || a.text("") != "" || a.body("") != "" {
		t.Fatal("an empty value is masked")
	}
	granted := httptest.NewRequest(http.MethodGet, "/", nil)
	granted = granted.WithContext(withPrincipal(granted.Context(), tokenPrincipal))
	if m := s1.maskOf(granted); m != nil || m.id(idUser, "u") != "u" || string(m.json([]byte(`{"a":1}`))) != `{"a":1}` {
		t.Fatal("the PII grant masks")
	}
}

// TestPIIMaskJSON: a message keeps its keys, its metadata and the shape of its values; ids are
// hashed at every depth, every other leaf is "[masked]", null stays null; a batch's messages
// keep their metadata; what is not JSON is "[masked]".
func TestPIIMaskJSON(t *testing.T) {
	m := &piiMask{key: []byte("k")}
	in := `{"type":"track","event":"Order Completed","messageId":"m-1","timestamp":"2026-11-27T10:00:00Z","userId":"u-planted",
		"anonymousId":"a-planted","properties":{"email":"planted@example.com","total":12.5,"paid":true,"items":[{"sku":"x"}],"coupon":null},
		"context":{"ip":"203.0.113.7","traits":{"userId":"u-planted"}}}`
	var got map[string]any
	if err := json.Unmarshal(m.json([]byte(in)), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": "track", "event": "Order Completed", "messageId": "m-1", "timestamp": "2026-11-27T10:00:00Z",
		"userId": m.id(idUser, "u-planted"), "anonymousId": m.id(idAnon, "a-planted"),
		"properties": map[string]any{"email": masked, "total": masked, "paid": masked, "items": []any{map[string]any{"sku": masked}}, "coupon": nil},
		"context":    map[string]any{"ip": masked, "traits": map[string]any{"userId": m.id(idUser, "u-planted")}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("masked\n%v\nwant\n%v", got, want)
	}
	batch := string(m.json([]byte(`{"batch":[{"type":"identify","userId":"u-planted","traits":{"email":"planted@example.com"}}],"sentAt":"2026-11-27T10:00:00Z"}`)))
	if strings.Contains(batch, "planted") || !strings.Contains(batch, `"type":"identify"`) || !strings.Contains(batch, `"sentAt":"2026-11-27T10:00:00Z"`) {
		t.Fatalf("a masked batch: %s", batch)
	}
	for _, raw := range []string{`"planted@example.com"`, `planted@example.com`, `{"a":1} {"b":2}`} {
		if got := string(m.json([]byte(raw))); got != `"[masked]"` {
			t.Fatalf("json(%s) = %s", raw, got)
		}
	}
	if got := m.body("error for planted@example.com"); got != masked {
		t.Fatalf("a text body masked: %q", got)
	}
	if got := m.body(`{"error":"planted@example.com"}`); got != `{"error":"[masked]"}` {
		t.Fatalf("a JSON body masked: %q", got)
	}
}

// TestPIIMaskProfile: a profile's ids, traits, computed traits and external ids are masked; its
// audiences, trait keys and external id types stay.
func TestPIIMaskProfile(t *testing.T) {
	m := &piiMask{key: []byte("k")}
	p := &schemas.ProfileView{UserID: "u-planted", AnonymousID: "a-planted", Traits: json.RawMessage(`{"email":"planted@example.com","age":42}`),
		ComputedTraits: map[string]json.RawMessage{"orders": json.RawMessage(`3`), "none": json.RawMessage(`null`)},
		Audiences:      []schemas.AudienceRef{{ID: "power-users", Key: "power_users"}}, MergedIDs: []string{"anon-planted"},
		ExternalIDs: []schemas.ExternalIDView{{Type: "email", ID: "planted@example.com"}},
		Identity:    []schemas.IdentityEventView{{Kind: "merge", Type: "email", ID: "planted@example.com", Other: "u-planted-2", Detail: "planted"}}}
	b, _ := json.Marshal(m.profile(p))
	got := string(b)
	if strings.Contains(got, "planted") || strings.Contains(got, `"age":42`) {
		t.Fatalf("a masked profile holds a value: %s", got)
	}
	for _, kept := range []string{`"power-users"`, `"email":"[masked]"`, `"type":"email"`, `"none":null`, `"orders":"[masked]"`, `"userId":"user:`} {
		if !strings.Contains(got, kept) {
			t.Fatalf("a masked profile lacks %s: %s", kept, got)
		}
	}
	if p.UserID != "u-planted" || string(p.Traits) != `{"email":"planted@example.com","age":42}` || p.ExternalIDs[0].ID != "planted@example.com" {
		t.Fatal("masking changed the profile it was given")
	}
}
