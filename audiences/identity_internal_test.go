package audiences

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestIdentityJSON: the changelog's hand-written JSON of a profile's identity reads back as
// what encoding/json writes from the struct tags, and a profile with one reads back equal.
func TestIdentityJSON(t *testing.T) {
	for name, x := range map[string]*identity{
		"empty":       {},
		"merges only": {Merges: 3},
		"log only":    {Log: []idEvent{{At: 5, Kind: "refusal", Type: "email", Value: `"q"@x`, Rule: ruleBlocked, Detail: "<why>"}}},
		"full": {IDs: []extID{{Type: "email", Value: "ada@example.com", At: 1}, {Type: "ios.idfa", Value: "é\u2028", At: 2}}, Merges: 1,
			Log: []idEvent{{At: 3, Kind: "merge", Type: "email", Value: "ada@example.com", Other: "anon-1"}, {At: 4, Kind: "refusal", Rule: ruleLimit}}},
	} {
		t.Run(name, func(t *testing.T) {
			// The same members in the same order; strings escaped as the rest of the changelog
			// (schemas.AppendJSONString: no HTML escapes), so compared decoded.
			want, _ := json.Marshal(x)
			got := x.appendJSON(nil)
			var g, w identity
			if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil || !reflect.DeepEqual(g, w) || !reflect.DeepEqual(&g, x) {
				t.Fatalf("appendJSON\n%s\nencoding/json\n%s", got, want)
			}
			p := &profile{ID: "u1", ids: userIsID, Identity: x}
			var back profile
			if err := json.Unmarshal(p.appendJSON(nil), &back); err != nil || !reflect.DeepEqual(back.Identity, x) {
				t.Fatalf("round trip: %v %+v, want %+v", err, back.Identity, x)
			}
		})
	}
}

// TestMessageIDs: the external ids a message carries, of the types that identify.
func TestMessageIDs(t *testing.T) {
	types := map[string]bool{"email": true, "ios.idfa": true}
	var got []string
	for _, raw := range []string{
		`{"type":"identify","userId":"u","traits":{"email":"a@x","email":"b@x"}}`,
		`{"type":"track","userId":"u","event":"E","context":{"traits":{"email":"c@x"},"externalIds":[{"id":"d1","type":"ios.idfa","collection":"users","encoding":"none"},{"id":"p1","type":"phone","collection":"users"},{"id":"g1","type":"ios.idfa","collection":"accounts"},{"id":7,"type":"ios.idfa"}]}}`,
		`{"type":"track","userId":"u","event":"E","properties":{"email":"no@x"}}`,
		`{"type":"page","userId":"u","traits":{"email":"not-identify@x"}}`,
	} {
		msg, err := schemas.DecodeMessage([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		messageIDs(msg, types, func(typ string, v []byte) { got = append(got, typ+":"+string(v)) })
	}
	want := []string{"email:b@x", "email:c@x", "ios.idfa:d1"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ids %q, want %q", got, want)
	}
}
