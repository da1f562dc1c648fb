package audiences

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unique"
)

func TestMergeTraits(t *testing.T) {
	tests := []struct {
		name     string
		identify []string // the traits of identify calls, in order
		want     string   // the profile's traits as JSON
	}{
		{"first identify", []string{`{"plan":"pro","age":30}`}, `{"age":30,"plan":"pro"}`},
		{"later wins", []string{`{"plan":"free"}`, `{"plan":"pro"}`}, `{"plan":"pro"}`},
		{"other keys kept", []string{`{"plan":"free","age":30}`, `{"plan":"pro"}`}, `{"age":30,"plan":"pro"}`},
		{"null removes", []string{`{"plan":"free","age":30}`, `{"plan":null}`}, `{"age":30}`},
		{"null of an absent trait", []string{`{"age":30}`, `{"plan":null}`}, `{"age":30}`},
		{"set again after removal", []string{`{"plan":"free"}`, `{"plan":null}`, `{"plan":"pro"}`}, `{"plan":"pro"}`},
		{"kinds", []string{`{"s":"x","n":1.5,"b":false,"o":{"city": "Paris"},"l":[1, "a"]}`}, `{"b":false,"l":[1,"a"],"n":1.5,"o":{"city":"Paris"},"s":"x"}`},
		{"an object replaces a string", []string{`{"address":"x"}`, `{"address":{"city":"Paris"}}`}, `{"address":{"city":"Paris"}}`},
		{"not an object is ignored", []string{`{"plan":"pro"}`, `["plan"]`, `"x"`, `null`, ``, `{bad`}, `{"plan":"pro"}`},
		{"new keys come after old ones", []string{`{"b":1}`, `{"a":2}`}, `{"b":1,"a":2}`},
		{"keys are case-sensitive", []string{`{"Plan":"a","plan":"b"}`}, `{"Plan":"a","plan":"b"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProfile()
			for _, tr := range tt.identify {
				p.mergeTraits(json.RawMessage(tr), nil)
			}
			got, err := json.Marshal(p.Traits)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("traits = %s, want %s", got, tt.want)
			}
		})
	}
}

// absorbModel has every kind of aggregate over "Order Completed".
const absorbModel = `
computedTraits:
  - {id: n, name: N, source: engage, count: {event: Order Completed}}
  - {id: big, name: Big, source: engage, count: {event: Order Completed, where: [{property: revenue, gte: 100}]}}
  - {id: sum, name: Sum, source: engage, sum: {event: Order Completed, property: revenue}}
  - {id: lo, name: Lo, source: engage, min: {event: Order Completed, property: revenue}}
  - {id: hi, name: Hi, source: engage, max: {event: Order Completed, property: revenue}}
  - {id: first, name: First, source: engage, first: {event: Order Completed, property: coupon}}
  - {id: last, name: Last, source: engage, last: {event: Order Completed, property: coupon}}
  - {id: fav, name: Fav, source: engage, mostFrequent: {event: Order Completed, property: category}}
  - {id: skus, name: Skus, source: engage, uniqueList: {event: Order Completed, property: sku}}
`

type order struct {
	ago                   int64
	revenue               float64
	coupon, category, sku string
}

func (o order) props() string {
	b, _ := json.Marshal(map[string]any{"revenue": o.revenue, "coupon": o.coupon, "category": o.category, "sku": o.sku})
	return string(b)
}

func TestAbsorb(t *testing.T) {
	m := compileYAML(t, absorbModel)
	// The user: orders 3 and 1 hours back; the anonymous profile merged into it: orders 5
	// hours, 2 hours and 10 minutes back.
	user := newUserProfile("u1")
	user.mergeTraits(json.RawMessage(`{"plan":"pro","email":"u@example.com"}`), nil)
	for _, o := range []order{{3 * hour, 50, "U1", "shoes", "a"}, {hour, 150, "U2", "hats", "b"}} {
		track(m, user, "Order Completed", o.props(), testNow-o.ago, testNow-o.ago)
	}
	track(m, user, "Signed Up", `{}`, testNow-4*hour, testNow-4*hour)
	anon := newAnonProfile("anon-1")
	anon.addMerged("anon-0")
	anon.mergeTraits(json.RawMessage(`{"plan":"free","utm":"ads"}`), nil)
	for _, o := range []order{{5 * hour, 200, "A1", "hats", "c"}, {2 * hour, 10, "A2", "hats", "a"}, {10 * minute, 300, "A3", "socks", "d"}} {
		track(m, anon, "Order Completed", o.props(), testNow-o.ago, testNow-o.ago)
	}
	track(m, anon, "Viewed", `{}`, testNow-6*hour, testNow-6*hour)

	user.absorb(anon, testNow)

	if got, _ := json.Marshal(user.Traits); string(got) != `{"email":"u@example.com","plan":"pro","utm":"ads"}` {
		t.Errorf("traits = %s: the user's win, the anonymous ones fill in", got)
	}
	if user.FirstSeen != testNow-6*hour || user.LastSeen != testNow-10*minute {
		t.Errorf("first, last seen = now%+d, now%+d; want now-6h, now-10m", user.FirstSeen-testNow, user.LastSeen-testNow)
	}
	for name, want := range map[string]uint64{"Order Completed": 5, "Signed Up": 1, "Viewed": 1} {
		if s := user.eventSeries(name, false); s == nil || s.Total != want {
			t.Errorf("%s: series %+v, want Total %d", name, s, want)
		} else if n := s.total(day, testNow); n != want {
			t.Errorf("%s: %d in the last day, want %d", name, n, want)
		}
	}
	wants := map[string]string{
		"n": `5`, "big": `3`, "sum": `710`, "lo": `10`, "hi": `300`,
		"first": `"A1"`, "last": `"A3"`,
		// hats: 1 of the user's and 2 of the anonymous profile's.
		"fav": `"hats"`,
		// The user's first, then the anonymous profile's new ones.
		"skus": `["a","b","c","d"]`,
	}
	for id, want := range wants {
		if got := m.traitByID[id].value(user, testNow).appendJSON(nil); string(got) != want {
			t.Errorf("%s = %s, want %s", id, got, want)
		}
	}
	if !reflect.DeepEqual(user.merged(), []string{"anon-1", "anon-0"}) {
		t.Errorf("merged = %v, want [anon-1 anon-0]", user.merged())
	}
	if user.anonymousID() != "" {
		t.Errorf("anonymousId = %q: an identified profile keeps none", user.anonymousID())
	}
}

func TestAbsorbEdges(t *testing.T) {
	t.Run("first and last keep the earliest and the latest", func(t *testing.T) {
		m := compileYAML(t, absorbModel)
		p, o := newProfile(), &profile{ID: "anon"}
		track(m, p, "Order Completed", order{2 * hour, 1, "P-early", "x", "s"}.props(), testNow-2*hour, testNow)
		track(m, p, "Order Completed", order{1 * hour, 1, "P-late", "x", "s"}.props(), testNow-hour, testNow)
		track(m, o, "Order Completed", order{90 * minute, 1, "O-mid", "x", "s"}.props(), testNow-90*minute, testNow)
		p.absorb(o, testNow)
		if f, l := m.traitByID["first"].value(p, testNow), m.traitByID["last"].value(p, testNow); !f.equal(strVal("P-early")) || !l.equal(strVal("P-late")) {
			t.Errorf("first, last = %s, %s; want P-early, P-late", f.appendJSON(nil), l.appendJSON(nil))
		}
	})
	t.Run("mostFrequent counts add up", func(t *testing.T) {
		m := compileYAML(t, absorbModel)
		p, o := newProfile(), &profile{ID: "anon"}
		// p: a a b; o: b b. Together b (3) beats a (2), though each alone did not.
		for i, c := range []string{"a", "a", "b"} {
			track(m, p, "Order Completed", `{"category":"`+c+`"}`, testNow-int64(i)*minute, testNow)
		}
		for i, c := range []string{"b", "b"} {
			track(m, o, "Order Completed", `{"category":"`+c+`"}`, testNow-int64(10+i)*minute, testNow)
		}
		if v := m.traitByID["fav"].value(p, testNow); !v.equal(strVal("a")) {
			t.Fatalf("before: fav = %s, want a", v.appendJSON(nil))
		}
		p.absorb(o, testNow)
		if v := m.traitByID["fav"].value(p, testNow); !v.equal(strVal("b")) {
			t.Errorf("after: fav = %s, want b", v.appendJSON(nil))
		}
		if got := p.agg(m.traitByID["fav"].agg.sym, false).freqs(); len(got) != 2 || got[1].N != 3 || got[1].First != testNow-11*minute {
			t.Errorf("freq = %+v, want b counted 3 times, first seen 11 minutes back", got)
		}
	})
	t.Run("an empty profile changes nothing", func(t *testing.T) {
		m := compileYAML(t, absorbModel)
		p := newProfile()
		p.mergeTraits(json.RawMessage(`{"plan":"pro"}`), nil)
		track(m, p, "Order Completed", order{hour, 5, "C", "x", "s"}.props(), testNow-hour, testNow)
		before, _ := json.Marshal(p)
		p.absorb(&profile{}, testNow)
		if after, _ := json.Marshal(p); string(after) != string(before) {
			t.Errorf("absorbing an empty profile:\n%s\nbecame\n%s", before, after)
		}
	})
	t.Run("an anonymous profile takes the other's anonymous id", func(t *testing.T) {
		p := &profile{ID: "anon-2"}
		p.absorb(&profile{ID: "anon-1", ids: anonIsID, FirstSeen: testNow - hour, LastSeen: testNow - hour}, testNow)
		if p.anonymousID() != "anon-1" || p.FirstSeen != testNow-hour || p.LastSeen != testNow-hour {
			t.Errorf("profile = %+v", p)
		}
	})
	t.Run("merged ids are bounded", func(t *testing.T) {
		p := newProfile()
		for i := range maxMerged + 3 {
			p.absorb(&profile{ID: "anon-" + strings.Repeat("x", i+1)}, testNow)
		}
		p.absorb(&profile{ID: p.ID}, testNow)
		if m := p.merged(); len(m) != maxMerged || m[0] != "anon-xxxx" || slices.Contains(m, p.ID) {
			t.Errorf("merged = %v: want the last %d, without the profile's own id", m, maxMerged)
		}
	})
}

func TestValJSON(t *testing.T) {
	tests := []struct {
		in   string
		k    kind
		want string // MarshalJSON
	}{
		{`"text"`, kString, `"text"`},
		{`"<b>&\u2028\"\\"`, kString, `"<b>&` + "\u2028" + `\"\\"`},
		{`""`, kString, `""`},
		{`42`, kNumber, `42`},
		{`-1.5e3`, kNumber, `-1500`},
		{`0.1`, kNumber, `0.1`},
		{`true`, kBool, `true`},
		{`false`, kBool, `false`},
		{`null`, kNull, `null`},
		{`{"a":1,"b":[true,null]}`, kRaw, `{"a":1,"b":[true,null]}`},
		{"{ \"a\" : 1,\n \"b\": [ 1, 2 ] }", kRaw, `{"a":1,"b":[1,2]}`},
		{`["x", "y"]`, kRaw, `["x","y"]`},
		{`[]`, kRaw, `[]`},
		{`{"h":"<b> & </b>"}`, kRaw, `{"h":"\u003cb\u003e \u0026 \u003c/b\u003e"}`},
		{"[\"\u2028\"]", kRaw, `["\u2028"]`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var v val
			if err := json.Unmarshal([]byte(tt.in), &v); err != nil {
				t.Fatal(err)
			}
			if v.k != tt.k {
				t.Fatalf("kind = %d, want %d", v.k, tt.k)
			}
			if got := string(v.appendJSON(nil)); got != tt.want {
				t.Errorf("appendJSON = %s, want %s", got, tt.want)
			}
			// Through json.Marshal (which escapes <, >, & and U+2028 in what MarshalJSON
			// returns) and back: the same value.
			b, err := json.Marshal(struct{ V val }{v})
			if err != nil {
				t.Fatal(err)
			}
			var back struct{ V val }
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back.V != v {
				t.Errorf("round trip through %s: %+v, want %+v", b, back.V, v)
			}
		})
	}
}

// TestProfileJSON: a profile is the changelog record; what is restored must be what was
// written.
func TestProfileJSON(t *testing.T) {
	m := compileYAML(t, absorbModel)
	p := newUserProfile("u1")
	p.mergeTraits(json.RawMessage(`{"z":"last key first","name":"Ada <ada@example.com>","age":36,"vip":true,"off":false,`+
		`"address":{"city": "Paris", "zip": "75001"},"tags":["a", "b"],"empty":[],"gone":1}`), nil)
	p.mergeTraits(json.RawMessage(`{"gone":null,"b":0}`), nil)
	for i, o := range []order{{3 * day, 50, "C1", "shoes", "a"}, {2 * hour, 150.25, "C2", "hats", "b"}, {minute, -3, "C3", "hats", "<c>"}} {
		at := testNow - o.ago
		track(m, p, "Order Completed", o.props(), at, at)
		if i == 0 {
			// An object-valued coupon and category.
			track(m, p, "Order Completed", `{"coupon":{"code": "X"},"category":["k", 1],"sku":{"s":"<1>"}}`, at, at)
		}
	}
	p.setSynced("a/vip", "v1", 0, true)
	p.setSynced("t/skus", "v2", valueHash(m.traitByID["skus"].value(p, testNow)), true)
	p.setSynced("t/fav", "v3", valueHash(m.traitByID["fav"].value(p, testNow)), true)
	p.addMerged("anon-1")

	for _, tt := range []struct {
		name string
		p    *profile
	}{
		{"full", p},
		{"merged into another", newRedirect("anon-1", "u1")},
		{"suppressed", &profile{ID: "u2", Suppressed: true}},
		{"anonymous", &profile{ID: "anon-9", ids: anonIsID, FirstSeen: 1, LastSeen: 2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.p)
			if err != nil {
				t.Fatal(err)
			}
			var back profile
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(&back, tt.p) {
				t.Errorf("round trip of\n%s\ngave\n%+v\nwant\n%+v", b, back, *tt.p)
			}
			if again, _ := json.Marshal(&back); string(again) != string(b) {
				t.Errorf("written again:\n%s\nwant\n%s", again, b)
			}
			// What the restored profile computes and what it synced are equal (no identify
			// would be sent again after a restart).
			for _, d := range m.traits {
				if e, ok := back.synced("t/" + d.id); ok && e.H != valueHash(d.value(&back, testNow)) {
					t.Errorf("%s: synced hash %x, computes %s after the restore", d.id, e.H, d.value(&back, testNow).appendJSON(nil))
				}
			}
		})
	}
	if got := string(p.Traits.get("address").appendJSON(nil)); got != `{"city":"Paris","zip":"75001"}` {
		t.Errorf("address = %s", got)
	}
}

func TestTraitsUnmarshal(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"b":1,"a":2}`, `{"b":1,"a":2}`},
		{`{"a":1,"b":null}`, `{"a":1}`},
		{`{"a":1,"a":2}`, `{"a":2}`},
		{`{}`, `{}`},
		{`null`, `{}`},
	}
	for _, tt := range tests {
		var tr traits
		if err := json.Unmarshal([]byte(tt.in), &tr); err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if got, _ := json.Marshal(tr); string(got) != tt.want {
			t.Errorf("%s read as %s, want %s", tt.in, got, tt.want)
		}
	}
	for _, bad := range []string{`[1]`, `"x"`, `{"a":}`} {
		var tr traits
		if err := json.Unmarshal([]byte(bad), &tr); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestRepeatedMessages(t *testing.T) {
	p := &profile{ID: "u"}
	for range 2 {
		if p.repeated(messageHash("")) {
			t.Fatal("messages without an id are never repeats")
		}
	}
	for i, id := range []string{"m1", "m2", "m1", "m3", "m4", "m5", "m1"} {
		want := i == 2 // m1 again while among the last 4; after 4 others it counts again
		if got := p.repeated(messageHash(id)); got != want {
			t.Errorf("message %d (%s): repeated %v, want %v", i, id, got, want)
		}
	}
}

// TestAggListsGrow: a mostFrequent's and a uniqueList's values keep their order and counts as
// their list grows from an array of one, then two, to a slice (docs/audiences.md#memory), and
// a list read back from the changelog is the one written.
func TestAggListsGrow(t *testing.T) {
	var f, u agg
	kinds := func() string { return fmt.Sprintf("%T %T", f.st, u.st) }
	var seen []string
	for i, s := range []string{"a", "b", "a", "c", "d"} {
		f.addFreq(strVal(s), 1, int64(i))
		u.addUnique(strVal(s))
		seen = append(seen, kinds())
	}
	want := []string{"*[1]audiences.freq *[1]audiences.val", "*[2]audiences.freq *[2]audiences.val", "*[2]audiences.freq *[2]audiences.val",
		"*audiences.freqList *audiences.valList", "*audiences.freqList *audiences.valList"}
	if !slices.Equal(seen, want) {
		t.Errorf("states as the lists grow: %q, want %q", seen, want)
	}
	if got, want := fmt.Sprint(f.freqs()), fmt.Sprint([]freq{{strVal("a"), 2, 0}, {strVal("b"), 1, 1}, {strVal("c"), 1, 3}, {strVal("d"), 1, 4}}); got != want {
		t.Errorf("frequencies %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(u.uniques()), fmt.Sprint([]val{strVal("a"), strVal("b"), strVal("c"), strVal("d")}); got != want {
		t.Errorf("unique values %s, want %s", got, want)
	}
	for _, n := range []int{1, 2, 4} {
		var a agg
		for i := range n {
			a.addFreq(numVal(float64(i)), uint32(i+1), int64(i))
		}
		a.Key = unique.Make("freq:x")
		var back agg
		if err := json.Unmarshal(a.appendJSON(nil), &back); err != nil || !slices.Equal(back.freqs(), a.freqs()) || fmt.Sprintf("%T", back.st) != fmt.Sprintf("%T", a.st) {
			t.Errorf("%d values read back as %T %v (%v), want %T %v", n, back.st, back.freqs(), err, a.st, a.freqs())
		}
	}
}

// TestRareFieldsOnlyWhenUsed: a profile whose ids are its key keeps no strings for them and
// allocates no holder of rare fields; merged ids and kept events allocate it, and it goes
// when they do; ids other than the key are kept and written as they were
// (docs/audiences.md#memory).
func TestRareFieldsOnlyWhenUsed(t *testing.T) {
	u, a := newUserProfile("u1"), newAnonProfile("a1")
	if u.rare != nil || a.rare != nil || u.userID() != "u1" || u.anonymousID() != "" || a.anonymousID() != "a1" || a.userID() != "" {
		t.Fatalf("new profiles: %+v %+v", u, a)
	}
	u.absorb(a, testNow)
	if u.rare == nil || !slices.Equal(u.merged(), []string{"a1"}) || u.anonymousID() != "" {
		t.Errorf("after a merge: rare %+v, merged %q, anonymousId %q", u.rare, u.merged(), u.anonymousID())
	}
	v := newUserProfile("u2")
	v.setTracks([]tracked{{At: 1, MessageID: "m"}})
	if v.rare == nil || len(v.tracks()) != 1 {
		t.Errorf("a kept event: rare %+v", v.rare)
	}
	v.setTracks(nil)
	if v.rare != nil {
		t.Errorf("no kept events left, the holder stays: %+v", v.rare)
	}
	var back profile
	w := &profile{ID: "k"}
	w.setIDs("other-user", "other-anon")
	if err := json.Unmarshal(w.appendJSON(nil), &back); err != nil || back.userID() != "other-user" || back.anonymousID() != "other-anon" || back.ids != 0 {
		t.Errorf("ids other than the key read back as %q %q (flags %b, %v)", back.userID(), back.anonymousID(), back.ids, err)
	}
	if r := newRedirect("a9", "u9"); r.mergedInto() != "u9" || r.active() || u.mergedInto() != "" || !u.active() {
		t.Errorf("redirect: %q active %v; profile: %q active %v", r.mergedInto(), r.active(), u.mergedInto(), u.active())
	}
}

// TestFirstLastOneValueWhileSame: a first/last aggregate keeps one value while its first and
// last are the same (docs/audiences.md#memory), both once they differ, and is read back from
// the changelog in the form it was written; -0 and 0 are not the same value as written.
func TestFirstLastOneValueWhileSame(t *testing.T) {
	a := agg{Key: unique.Make("firstlast:x")}
	a.setFL(stamped{V: strVal("a"), At: 5}, stamped{V: strVal("a"), At: 5})
	if _, ok := a.st.(*stamped); !ok {
		t.Fatalf("one value: state %T, want *stamped", a.st)
	}
	roundTrip := func(what string) {
		t.Helper()
		var back agg
		if err := json.Unmarshal(a.appendJSON(nil), &back); err != nil || string(back.appendJSON(nil)) != string(a.appendJSON(nil)) || fmt.Sprintf("%T", back.st) != fmt.Sprintf("%T", a.st) {
			t.Errorf("%s: read back as %s (%T), written %s (%T): %v", what, back.appendJSON(nil), back.st, a.appendJSON(nil), a.st, err)
		}
	}
	roundTrip("one value")
	first, _, _ := a.fl()
	a.setFL(first, stamped{V: strVal("b"), At: 9})
	if f, l, ok := a.fl(); !ok || f.V.s != "a" || l.V.s != "b" || f.At != 5 || l.At != 9 {
		t.Errorf("two values: %+v %+v %v", f, l, ok)
	}
	if _, ok := a.st.(*firstLast); !ok {
		t.Errorf("two values: state %T, want *firstLast", a.st)
	}
	roundTrip("two values")
	a.setFL(stamped{V: numVal(math.Copysign(0, -1)), At: 1}, stamped{V: numVal(0), At: 1})
	if _, ok := a.st.(*firstLast); !ok {
		t.Errorf("-0 and 0: state %T, want *firstLast", a.st)
	}
	roundTrip("-0 and 0")
}
