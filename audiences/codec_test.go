package audiences

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"reflect"
	"testing"
	"unique"
)

// changelogForm is the profile's profileJSON, built field by field: what encoding/json
// writes from its tags is the changelog format the hand-written encoder must write.
func changelogForm(p *profile) *profileJSON {
	j := &profileJSON{ID: p.ID, UserID: p.userID(), AnonymousID: p.anonymousID(), Traits: p.Traits, FirstSeen: p.FirstSeen,
		LastSeen: p.LastSeen, Merged: p.merged(), Tracks: p.tracks(), Identity: p.Identity, MergedInto: p.mergedInto(),
		Recent: p.Recent, RecentNext: p.RecentNext, Suppressed: p.Suppressed}
	for _, e := range p.events() {
		j.Events = append(j.Events, namedJSON{e.Name.Value(), e.counter})
	}
	for i := range p.aggs() {
		a := &p.aggs()[i]
		aj := aggJSON{Key: a.Key.Value(), S: a.ser(), Freq: a.freqs(), List: a.uniques()}
		if first, last, ok := a.fl(); ok {
			aj.First, aj.Last = &first, &last
		}
		j.Aggs = append(j.Aggs, aj)
	}
	for e := range p.Synced.all() {
		j.Synced = append(j.Synced, sentJSON{ID: e.id(), Version: e.version(), H: e.H})
	}
	return j
}

// TestProfileJSONMatchesEncodingJSON: the hand-written changelog encoder writes what
// encoding/json writes from the tags of its changelog form (compared as decoded JSON), and what it writes
// decodes to the same profile.
func TestProfileJSONMatchesEncodingJSON(t *testing.T) {
	full := &profile{ID: "u<1>", ids: userIsID, rare: &profileRare{AnonymousID: "a\"1", Merged: []string{"anon-1", "anon-2"},
		Tracks: []tracked{{At: 100, Event: "Order Completed", MessageID: "m\"1", Source: "web", Props: `{"total":12.5,"sku":["a"]}`}, {At: 101, Event: "Signed Up"}}},
		FirstSeen: 1, LastSeen: 2,
		Traits: traits{{"plan", strVal("pro")}, {"n", numVal(1.5)}, {"ok", boolVal(true)}, {"obj", val{k: kRaw, s: `{"a":[1,2]}`}}},
		l: &lists{Events: []named{{Name: unique.Make("E"), counter: counter{Total: 3, Buckets: []count{{At: 10, N: 2}, {At: 11, N: 1}}}}, {Name: unique.Make("Empty")}},
			Aggs: []agg{
				{Key: unique.Make("series:x"), st: &series{Total: 1, Buckets: []bucket{{At: 5, N: 1, Sum: 1e21, Min: 1e21, Max: 1e21}}}},
				{Key: unique.Make("firstlast:y"), st: &firstLast{First: stamped{V: strVal("a"), At: 7}, Last: stamped{V: numVal(0.1), At: 9}}},
				{Key: unique.Make("freq:z"), st: &freqList{{V: strVal("shoes"), N: 4, First: 3}, {V: null, N: 1}}},
				{Key: unique.Make("list:w"), st: &valList{strVal("x"), numVal(2), val{k: kRaw, s: `["y"]`}}},
				{Key: unique.Make("empty")},
			}},
		Synced: syncedList(nil).with("a/vip", "abc", 0, true).with("t/n", "def", valueHash(numVal(12)), true),
	}
	for name, p := range map[string]*profile{
		"full":       full,
		"bare":       {ID: "x"},
		"redirect":   newRedirect("anon", "u1"),
		"other ids":  {ID: "x", rare: &profileRare{UserID: "u", AnonymousID: "a"}},
		"suppressed": {ID: "s", Suppressed: true},
	} {
		t.Run(name, func(t *testing.T) {
			ours := p.appendJSON(nil)
			theirs, err := json.Marshal(changelogForm(p))
			if err != nil {
				t.Fatal(err)
			}
			var a, b any
			if err := json.Unmarshal(ours, &a); err != nil {
				t.Fatalf("ours is not JSON: %v: %s", err, ours)
			}
			_ = json.Unmarshal(theirs, &b)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("ours   %s\ntheirs %s", ours, theirs)
			}
			var back profile
			if err := json.Unmarshal(ours, &back); err != nil {
				t.Fatal(err)
			}
			if again := back.appendJSON(nil); string(again) != string(ours) {
				t.Fatalf("round trip:\n%s\n%s", ours, again)
			}
		})
	}
	// No JSON infinity: a sum that overflowed is written as the largest float.
	inf := (&profile{ID: "i", l: &lists{Aggs: []agg{{Key: unique.Make("series:i"), st: &series{Buckets: []bucket{{N: 1, Sum: math.Inf(1)}}}}}}}).appendJSON(nil)
	var v any
	if err := json.Unmarshal(inf, &v); err != nil {
		t.Fatalf("an infinite sum makes %s: %v", inf, err)
	}
}

// BenchmarkProfileEncode: the changelog encoder against encoding/json, for a profile with a
// few traits, three event names and three aggregates.
func BenchmarkProfileEncode(b *testing.B) {
	p := &profile{ID: "user-123", ids: userIsID, FirstSeen: 1, LastSeen: 2,
		Traits: traits{{"plan", strVal("pro")}, {"country", strVal("FR")}, {"email", strVal("user-123@example.com")}}}
	for i, e := range []string{"Order Completed", "Product Viewed", "Page Viewed"} {
		p.lists().Events = append(p.events(), named{Name: unique.Make(e), counter: counter{Total: 5, Buckets: []count{{At: int32(100 + i), N: 3}, {At: 200, N: 2}}}})
	}
	p.lists().Aggs = []agg{{Key: unique.Make("series:1"), st: &series{Total: 2, Buckets: []bucket{{At: 100, N: 2, Sum: 120, Min: 20, Max: 100}}}},
		{Key: unique.Make("firstlast:2"), st: &firstLast{Last: stamped{V: strVal("sku-1"), At: 5}}}, {Key: unique.Make("list:3"), st: &valList{strVal("shoes"), strVal("hats")}}}
	b.Run("ours", func(b *testing.B) {
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			buf = p.appendJSON(buf[:0])
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(changelogForm(p))
		}
	})
}

// TestStateRecordsBeforeCompactLayout: audiences.state profile records written before the
// compact layout (testdata/state_profiles_v1.jsonl: what the service wrote for the benchmark
// config, with every kind of aggregate, synced entries and merged ids) still decode, are
// written back byte for byte, also once packed as a restore packs them, and a sync of the
// restored (packed) profiles at the moment they were written sends nothing: they compute
// what was synced (docs/audiences.md#memory).
func TestStateRecordsBeforeCompactLayout(t *testing.T) {
	raw, err := os.ReadFile("testdata/state_profiles_v1.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	s, part, bt := newBenchService(t)
	const written = 1_790_000_000_000 // the batch clock they were written with
	bt.now = written
	for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		var p profile
		if err := json.Unmarshal(line, &p); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if again := p.appendJSON(nil); !bytes.Equal(again, line) {
			t.Errorf("written back differently:\nold %s\nnew %s", line, again)
		}
		p.pack() // as a restore does (packed.go)
		if p.l != nil {
			t.Errorf("profile %s not packed", p.ID)
		}
		if again := p.appendJSON(nil); !bytes.Equal(again, line) {
			t.Errorf("packed, written back differently:\nold %s\nnew %s", line, again)
		}
		part.profiles[p.ID] = &p
	}
	if len(part.profiles) != 3 {
		t.Fatalf("%d profiles restored, want 3", len(part.profiles))
	}
	if sent := syncAllProfiles(s, part, bt); sent != 0 {
		t.Errorf("a sync of the restored profiles sent %d identify calls, want none", sent)
	}
}

// BenchmarkProfileDecode: reading a profile from audiences.state (a restore), for the first
// profile of testdata/state_profiles_v1.jsonl (every kind of aggregate, 11 synced entries).
func BenchmarkProfileDecode(b *testing.B) {
	raw, err := os.ReadFile("testdata/state_profiles_v1.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	line := bytes.SplitN(raw, []byte("\n"), 2)[0]
	for b.Loop() {
		var p profile
		if err := json.Unmarshal(line, &p); err != nil {
			b.Fatal(err)
		}
	}
}
