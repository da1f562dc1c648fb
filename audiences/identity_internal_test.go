package audiences

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"runtime"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

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

// TestLinkOpJSON: a link hand-off written without reflection reads back, through encoding/json,
// as what encoding/json writes; decodeOp reads a link as encoding/json does, also one of a shape
// appendLinkJSON never writes (left to encoding/json).
func TestLinkOpJSON(t *testing.T) {
	key := extKey(idEmail, "ada@example.com")
	for name, o := range map[string]op{
		"no summary":    {Op: opLink, From: key, Into: "u1"},
		"empty summary": {Op: opLink, From: key, Into: "anon-1", Summary: &idSummary{}},
		"summary": {Op: opLink, From: key, Into: `u"<é>\u2028`, Summary: &idSummary{UserID: "u<1>", Merges: 2,
			IDs: []sumID{{Type: "ios.idfa", Key: extKey("ios.idfa", "x"), At: 1}, {Type: idEmail, Key: key, At: 1795599000000}}}},
		"via": {Op: opLink, From: key, Into: "u1", Via: "email:x", Summary: &idSummary{UserID: "u1"}},
	} {
		t.Run(name, func(t *testing.T) {
			got := opRecord(o)
			want, _ := json.Marshal(o)
			var g, w op
			if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil || !reflect.DeepEqual(g, w) || !reflect.DeepEqual(g, o) {
				t.Fatalf("appendLinkJSON\n%s\nencoding/json\n%s", got, want)
			}
			if _, ok := decodeLinkOp(got); !ok {
				t.Fatalf("decodeLinkOp does not read %s", got)
			}
			if d, err := decodeOp(got); err != nil || !reflect.DeepEqual(resolved(d), w) {
				t.Fatalf("decodeOp(%s) = %+v, %v; want %+v", got, d, err, w)
			}
		})
	}
	links := op{Op: opLinks, Links: []op{{Op: opLink, From: key, Into: "u1", Summary: &idSummary{UserID: "u1", IDs: []sumID{{Type: idEmail, Key: key, At: 3}}}},
		{Op: opLink, From: extKey(idEmail, "b@x"), Into: "anon-<2>", Summary: &idSummary{}}}}
	got, want := opRecord(links), func() []byte { b, _ := json.Marshal(links); return b }()
	var g, w op
	if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil || !reflect.DeepEqual(g, w) || !reflect.DeepEqual(g, links) {
		t.Fatalf("appendLinksJSON\n%s\nencoding/json\n%s", got, want)
	}
	if _, ok := decodeLinksOp(got); !ok {
		t.Fatalf("decodeLinksOp does not read %s", got)
	}
	if d, err := decodeOp(got); err != nil || !reflect.DeepEqual(resolved(d), w) {
		t.Fatalf("decodeOp(%s) = %+v, %v; want %+v", got, d, err, w)
	}
	for _, raw := range []string{
		`{"op":"link","from":"\u001fk","into":"u1","summary":{"userId":"u1","extra":1}}`,
		`{"op":"link","from":"\u001fk","into":"u1","summary":{"userId":"u\u00e9","ids":[{"t":"ios.idfa","k":"\u001fk2","at":-1}]}}`,
		`{"op":"link","from":"\u001fk","into":"u1","summary":[]}`,
		`{"op":"links","links":[]}`,
		`{"op":"links","links":[{"op":"link","from":"\u001fk","into":"u1"},{"op":"join","from":"a","into":"b"}]}`,
		`{"op":"links","links":[{"into":"u1","op":"link"}]}`,
		`{"op":"links","links":null}`,
		`{"op":"links","links":[1]}`,
		`{"op":"link","from":"\u001fk","into":"u1","summary":{"ids":[]}}`,
		`{"op":"link","from":"\u001fe\u0041:\"x","into":"u1","summary":{"ids":[{"t":"email","k":"\u001f\u001f","at":1}]}}`,
		"{\"op\":\"link\",\"from\":\"\\u001fe:\xff\",\"into\":\"u1\"}",
		`{"op":"link","from":"\u001f","into":"\u001fé"}`,
		`{"op":"link","from":"\u001fk","into":"u1","summary":null}`,
		`{"op":"link","from":"\u001fk","into":"u1","summary":{"ids":null,"merges":1}}`,
		`{"op":"link","from":"\u001fk","Into":"u1"}`,
		`{"op":"link","from":"\u001fk","into":"u1","sync":true}`,
		`{"op":"link","from":"\u001fk","into":"u1","summary":{"ids":[{"t":"email","k":"\u001fk","at":1.5}]}}`,
		`{"op":"link","from":"\u001fk","into":"u1","summary":{"ids":[{"t":"email","k":"\u001fk","at":1}],"merges":"x"}}`,
		`{"op":"link","from":"\u001fk","into":"u1"`,
		`{"op":"link","from":"a\ud800b","into":7}`,
	} {
		var want op
		wantErr := json.Unmarshal([]byte(raw), &want)
		got, err := decodeOp([]byte(raw))
		if (err != nil) != (wantErr != nil) || (err == nil && !reflect.DeepEqual(resolved(got), want)) {
			t.Errorf("decodeOp(%s) = %+v, %v; encoding/json %+v, %v", raw, got, err, want, wantErr)
		}
	}
}

// resolved is o, and its links, with their summaries decoded (op.summary), as encoding/json
// decodes them at once.
func resolved(o op) op {
	o.summary()
	for i := range o.Links {
		o.Links[i] = resolved(o.Links[i])
	}
	return o
}

// TestLinkSummaryOfProfile: a link written for a profile's new id (its summary written from
// the profile) is byte for byte the link of summaryOf the profile.
func TestLinkSummaryOfProfile(t *testing.T) {
	key := extKey(idEmail, "ada@example.com")
	for name, p := range map[string]*profile{
		"anonymous, no identity": newAnonProfile("anon-1"),
		"user, one id":           {ID: "u1", ids: userIsID, Identity: &identity{IDs: []extID{{Type: idEmail, Value: "ada@example.com", At: 7}}}},
		"user, ids and merges": {ID: "u<2>", ids: userIsID, Identity: &identity{Merges: 3, IDs: []extID{{Type: "ios.idfa", Value: "x\u2028", At: 1},
			{Type: idEmail, Value: "ada@example.com", At: 1795599000000}}}},
		"identity without ids": {ID: "u3", ids: userIsID, Identity: &identity{Merges: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			for _, from := range []string{key, ""} {
				got := (&op{Op: opLink, From: from, Into: p.ID, sumOf: p}).appendLinkJSON(nil)
				want := (&op{Op: opLink, From: from, Into: p.ID, Summary: summaryOf(p, from)}).appendLinkJSON(nil)
				if string(got) != string(want) {
					t.Fatalf("from the profile\n%s\nfrom summaryOf\n%s", got, want)
				}
			}
		})
	}
}

// TestDefaultBlocked: the default blocked values are matched without the regular expression,
// exactly as the expression matches them.
func TestDefaultBlocked(t *testing.T) {
	re := regexp.MustCompile(DefaultIdentityBlocked)
	for _, v := range []string{"", "0", "000", "-", "--0-", "-1", "-2", "1", "01", "null", "NULL", "Nil", "none", "None ",
		"undefined", "UNDEFINED", "anonymous", "anonymouS", "anonymou\u017f", "unknown", "un\u212anown", "unknowns", " null",
		"null\n", "ada@example.com", "null@example.com", "0@0", "nill", "anonymousanonymousanonymousanonymous", "\xff"} {
		if got, want := defaultBlocked(v), re.MatchString(v); got != want {
			t.Errorf("defaultBlocked(%q) = %v, the expression %v", v, got, want)
		}
	}
	for _, expr := range []string{DefaultIdentityBlocked, `^test-`} {
		f, err := compileBlocked(expr)
		if err != nil || !f("null") == (expr == DefaultIdentityBlocked) || f("test-1") == (expr == DefaultIdentityBlocked) {
			t.Errorf("compileBlocked(%q): %v; null %v, test-1 %v", expr, err, f("null"), f("test-1"))
		}
	}
	if _, err := compileBlocked(`(`); err == nil {
		t.Error("compileBlocked((): no error")
	}
}

// TestKnownIDAllocs: a message carrying an external id its profile holds already (every
// identify of a known user) costs no allocation in identity resolution.
func TestKnownIDAllocs(t *testing.T) {
	rules, err := compileRules(func() *Config { c := DefaultConfig(); return &c }(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &Service{}
	s.rules.Store(rules)
	prof := newUserProfile("u1")
	prof.Identity = &identity{IDs: []extID{{Type: idEmail, Value: "ada@example.com", At: 1}}}
	m, err := schemas.DecodeMessage([]byte(`{"type":"identify","userId":"u1","traits":{"plan":"pro","email":"ada@example.com"},"context":{"ip":"203.0.113.9"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, part := &batch{touched: map[int32]*partition{}}, &partition{profiles: map[string]*profile{"u1": prof}}
	if n := testing.AllocsPerRun(100, func() { s.linkExternalIDs(b, 0, part, prof, m, 2) }); n != 0 || len(b.out) != 0 {
		t.Fatalf("%v allocations, %d records for a known email; want none", n, len(b.out))
	}
}

// TestAddLinkOrder: a batch's links for one partition share a record until another record for
// that partition is written after it; the next ones then start a record of their own, so the
// partition reads every hand-off in the order it was made. One link is written as a link op,
// more as a links op.
func TestAddLinkOrder(t *testing.T) {
	s := &Service{cfg: Config{RepartitionTopic: "r"}, nparts: 3, keyPart: kgo.StickyKeyPartitioner(nil).ForTopic("t")}
	on := map[int32][]string{}
	for i := 0; len(on[0]) < 4 || len(on[1]) < 1; i++ {
		k := extKey(idEmail, fmt.Sprintf("u%d@example.com", i))
		on[s.partitionOf(k)] = append(on[s.partitionOf(k)], k)
	}
	link := func(k string) op { return op{Op: opLink, From: k, Into: "p-" + k[len(k)-4:]} }
	ptr := func(o op) *op { return &o }
	b := &batch{}
	s.addLink(b, s.partitionOf(on[0][0]), on[0][0], ptr(link(on[0][0])))
	s.addLink(b, s.partitionOf(on[1][0]), on[1][0], ptr(link(on[1][0])))
	s.addLink(b, s.partitionOf(on[0][1]), on[0][1], ptr(link(on[0][1])))
	b.out = append(b.out, &kgo.Record{Topic: "state", Partition: 0}) // another topic: no matter
	s.addLink(b, s.partitionOf(on[0][2]), on[0][2], ptr(link(on[0][2])))
	b.out = append(b.out, s.handOff(on[0][0], op{Op: opForget, From: on[0][0], Into: "gone"}))
	s.addLink(b, s.partitionOf(on[0][3]), on[0][3], ptr(link(on[0][3])))
	b.encodeLinks()
	var got [][]string
	for _, r := range b.out {
		if r.Topic != "r" {
			continue
		}
		o, err := decodeOp(r.Value)
		if err != nil || (o.Op != opLinks && r.Partition != s.partitionOf(o.From)) {
			t.Fatalf("record %s on %d: %v", r.Value, r.Partition, err)
		}
		var froms []string
		if o.Op == opLinks {
			for _, l := range o.Links {
				if !reflect.DeepEqual(l, link(l.From)) || s.partitionOf(l.From) != r.Partition {
					t.Fatalf("link %+v in a record of partition %d", l, r.Partition)
				}
				froms = append(froms, o.Op+" "+l.From)
			}
		} else {
			froms = append(froms, o.Op+" "+o.From)
		}
		got = append(got, froms)
	}
	want := [][]string{
		{"links " + on[0][0], "links " + on[0][1], "links " + on[0][2]},
		{"link " + on[1][0]},
		{"forget " + on[0][0]},
		{"link " + on[0][3]},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("records %q, want %q", got, want)
	}
}

// TestEntryValue: an external id's entry is read back from each form audiences.state holds it
// in (this version's, and earlier versions' redirects with "id" and "recent"), and nothing
// else is taken for one.
func TestEntryValue(t *testing.T) {
	key := extKey(idEmail, "ada@example.com")
	for _, tt := range []struct {
		key, value, into string
		ok               bool
	}{
		{key, `{"mergedInto":"u1"}`, "u1", true},
		{key, `{"mergedInto":"u\"1é"}`, "u\"1é", true},
		{key, `{"id":"` + `\u001femail:x","mergedInto":"anon-1","recent":["","","",""]}`, "anon-1", true},
		{key, `{"mergedInto":""}`, "", false},
		{key, `{"suppressed":true}`, "", false},
		{key, `{"mergedInto":"u1"`, "", false},
		{"u1", `{"mergedInto":"u2"}`, "", false}, // a merged user id: a profile's redirect
	} {
		if into, ok := entryValue(tt.key, []byte(tt.value)); into != tt.into || ok != tt.ok {
			t.Errorf("entryValue(%q, %s) = %q, %v; want %q, %v", tt.key, tt.value, into, ok, tt.into, tt.ok)
		}
	}
}

// TestEntryHeap: an external id's entry costs its key, the claiming profile's id it shares
// and a map slot: well under the ~250 bytes of a redirect profile with its slot
// (docs/audiences.md#what-it-costs-and-privacy).
func TestEntryHeap(t *testing.T) {
	const n = 20_000
	s, part, b := newBenchService(t)
	profs := make([]*profile, n)
	for i := range profs {
		profs[i] = newUserProfile(fmt.Sprintf("user-%d", i))
		part.profiles[profs[i].ID] = profs[i]
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i, prof := range profs {
		key := extKey(idEmail, fmt.Sprintf("user-%d@example.com", i))
		s.claim(b, 0, part, key, prof.ID, func() *idSummary { return nil })
	}
	part.dirty = nil
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.0f heap bytes an entry", per)
	if part.held() != 2*n || per > 120 {
		t.Fatalf("%d held, %.0f heap bytes an entry; want %d and at most 120", part.held(), per, 2*n)
	}
	runtime.KeepAlive(profs)
}
