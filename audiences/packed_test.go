package audiences

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unique"

	"github.com/tributary-cdp/tributary/schemas"
)

// packedCopy is a copy of p (read back from its changelog JSON) packed, failing when it has
// counters or aggregates and does not pack.
func packedCopy(t *testing.T, p *profile) *profile {
	t.Helper()
	var q profile
	if err := json.Unmarshal(p.appendJSON(nil), &q); err != nil {
		t.Fatal(err)
	}
	if len(q.events()) == 0 && len(q.aggs()) == 0 {
		return &q
	}
	q.pack()
	if q.packed == "" || q.l != nil {
		t.Fatalf("not packed: %d bytes, %d events, %d aggregates", len(q.packed), len(q.events()), len(q.aggs()))
	}
	return &q
}

// TestPackedProfileIsTheSame: a profile's counters and aggregates packed (packed.go) write the
// same changelog JSON, and unpacked again are the same, for every kind of state and value a
// profile holds: buckets of one value and of three, -0, ±Inf and NaN sums, minutes before
// 1970, a first/last of one value and of two, lists of one, two and three values, null, bool,
// number, string and JSON values, an aggregate without state, a counter without buckets.
func TestPackedProfileIsTheSame(t *testing.T) {
	negZero := math.Copysign(0, -1)
	p := &profile{ID: "u1", ids: userIsID, l: &lists{
		Events: []named{
			{Name: unique.Make("E"), counter: counter{Total: 1 << 40, Buckets: []count{{At: -5, N: 2}, {At: 11, N: 1}, {At: 29_000_000, N: math.MaxUint32}}}},
			{Name: unique.Make("Empty")},
		},
		Aggs: []agg{
			{Key: unique.Make("series:x"), st: &series{Total: 9, Buckets: []bucket{
				{At: -100, N: 1, Sum: 1e21, Min: 1e21, Max: 1e21},
				{At: 5, N: 3, Sum: 12.5, Min: -2, Max: 10},
				{At: 6, N: 1},
				{At: 7, N: 1, Sum: negZero, Min: negZero, Max: negZero},
				{At: 8, N: 2, Sum: math.Inf(1), Min: 1, Max: math.MaxFloat64},
				{At: 9, N: 1, Sum: math.NaN(), Min: math.NaN(), Max: math.NaN()},
			}}},
			{Key: unique.Make("series:empty"), st: &series{}},
			{Key: unique.Make("firstlast:one"), st: &stamped{V: strVal("sku-1"), At: 1_700_000_000_000}},
			{Key: unique.Make("firstlast:two"), st: &firstLast{First: stamped{V: boolVal(true), At: -7}, Last: stamped{V: val{k: kRaw, s: `{"a":[1,"é"]}`}, At: 9}}},
			{Key: unique.Make("freq:1"), st: &[1]freq{{V: strVal(""), N: 1, First: 3}}},
			{Key: unique.Make("freq:2"), st: &[2]freq{{V: numVal(0.1), N: 4, First: 3}, {V: null, N: 1, First: -1}}},
			{Key: unique.Make("freq:3"), st: &freqList{{V: strVal("a"), N: 1}, {V: strVal(strings.Repeat("long ", 40)), N: 2}, {V: boolVal(false), N: 3}}},
			{Key: unique.Make("list:1"), st: &[1]val{strVal("x")}},
			{Key: unique.Make("list:3"), st: &valList{strVal("x"), numVal(2), val{k: kRaw, s: `["y"]`}}},
			{Key: unique.Make("empty")},
		},
	}}
	want := string(p.appendJSON(nil))
	q := &profile{ID: p.ID, ids: p.ids, l: &lists{Events: p.events(), Aggs: p.aggs()}}
	q.pack()
	if q.packed == "" || q.l != nil {
		t.Fatalf("not packed: %d bytes", len(q.packed))
	}
	if got := string(q.appendJSON(nil)); got != want {
		t.Fatalf("packed, the profile writes\n%s\nwant\n%s", got, want)
	}
	if json.Valid([]byte(want)) != true {
		t.Fatalf("not JSON: %s", want)
	}
	// What is read from the packed form: every aggregate and counter as the typed one.
	events, aggs := q.unpacked()
	if fmt.Sprintf("%v", events) != fmt.Sprintf("%v", p.events()) {
		t.Errorf("counters unpacked:\n%v\nwant\n%v", events, p.events())
	}
	if len(aggs) != len(p.aggs()) {
		t.Fatalf("%d aggregates unpacked, want %d", len(aggs), len(p.aggs()))
	}
	for i := range aggs {
		if got, want := string(aggs[i].appendJSON(nil)), string(p.aggs()[i].appendJSON(nil)); got != want {
			t.Errorf("aggregate %d unpacked: %s, want %s", i, got, want)
		}
		if got, want := fmt.Sprintf("%T", aggs[i].st), fmt.Sprintf("%T", p.aggs()[i].st); got != want && p.aggs()[i].st != nil {
			t.Errorf("aggregate %d unpacked as %s, want %s", i, got, want)
		}
	}
	bits := func(b bucket) [3]uint64 {
		return [3]uint64{math.Float64bits(b.Sum), math.Float64bits(b.Min), math.Float64bits(b.Max)}
	}
	for i, b := range aggs[0].ser().Buckets {
		if w := p.aggs()[0].ser().Buckets[i]; b.At != w.At || b.N != w.N || bits(b) != bits(w) {
			t.Errorf("bucket %d unpacked %+v, want %+v (the same bits)", i, b, w)
		}
	}
	// Changed, it is unpacked; packed again, the same string.
	packed := q.packed
	if c := q.eventSeries("E", false); c == nil || c.Total != 1<<40 || q.packed != "" {
		t.Fatalf("eventSeries of a packed profile: %+v (packed %q)", c, q.packed)
	}
	q.pack()
	if q.packed != packed {
		t.Errorf("packed again:\n%q\nwant\n%q", q.packed, packed)
	}
}

// TestPackedReadsAsUnpacked: rules and computed traits read from a packed profile what they
// read from the same profile unpacked, for profiles built from random events of every kind,
// at moments from before the events to months after (windows, between windows, every kind of
// computed trait, where filters).
func TestPackedReadsAsUnpacked(t *testing.T) {
	m := compileYAML(t, `
audiences:
  - {id: a1, name: A1, source: engage, rule: {event: Order Completed, atLeast: 2, within: 720h}}
  - {id: a2, name: A2, source: engage, rule: {event: Product Viewed, between: [48h, 1h]}}
  - {id: a3, name: A3, source: engage, rule: {event: Order Completed, where: [{property: revenue, gte: 100}], atLeast: 1, within: 2h}}
  - {id: a4, name: A4, source: engage, rule: {event: Page Viewed, atMost: 3}}
  - {id: a5, name: A5, source: engage, rule: {computedTrait: spend, gt: 150}}
computedTraits:
  - {id: spend, name: Spend, source: engage, sum: {event: Order Completed, property: revenue, within: 2160h}}
  - {id: spend-ever, name: Spend ever, source: engage, sum: {event: Order Completed, property: revenue}}
  - {id: avg, name: Avg, source: engage, avg: {event: Order Completed, property: revenue, within: 24h}}
  - {id: lo, name: Lo, source: engage, min: {event: Order Completed, property: revenue}}
  - {id: hi, name: Hi, source: engage, max: {event: Order Completed, property: revenue, within: 720h}}
  - {id: orders, name: Orders, source: engage, count: {event: Order Completed, within: 720h}}
  - {id: orders-ever, name: Orders ever, source: engage, count: {event: Order Completed}}
  - {id: big, name: Big, source: engage, count: {event: Order Completed, where: [{property: revenue, gte: 100}], within: 48h}}
  - {id: first-sku, name: First SKU, source: engage, first: {event: Product Viewed, property: sku}}
  - {id: last-sku, name: Last SKU, source: engage, last: {event: Product Viewed, property: sku}}
  - {id: top, name: Top, source: engage, mostFrequent: {event: Product Viewed, property: category}}
  - {id: cats, name: Cats, source: engage, uniqueList: {event: Product Viewed, property: category}}
`)
	r := rand.New(rand.NewPCG(1, 2))
	const now = 472_222 * hour // on the hour: events on window edges (whole minutes and hours)
	for u := range 200 {
		p := newUserProfile(fmt.Sprint("u", u))
		for range r.IntN(40) {
			at := now - r.Int64N(100*day/minute)*minute
			if r.IntN(2) == 0 {
				at = now - r.Int64N(100*day/hour)*hour
			}
			switch r.IntN(3) {
			case 0:
				track(m, p, "Order Completed", fmt.Sprintf(`{"revenue":%d}`, r.IntN(300)-20), at, at)
			case 1:
				track(m, p, "Product Viewed", fmt.Sprintf(`{"sku":"sku-%d","category":%q}`, r.IntN(20), benchCategories[r.IntN(5)]), at, at)
			default:
				track(m, p, "Page Viewed", `{}`, at, at)
			}
		}
		q := packedCopy(t, p)
		for _, at := range []int64{now - 101*day, now - day, now, now + 90*minute, now + 3*day, now + 200*day} {
			for _, d := range m.traits {
				if got, want := d.value(q, at), d.value(p, at); !got.equal(want) || got.appendJSON(nil) == nil {
					t.Errorf("profile %d at %d: trait %s = %s packed, %s unpacked", u, at, d.id, got.appendJSON(nil), want.appendJSON(nil))
				}
			}
			for _, a := range m.audiences {
				if got, want := a.root.eval(q, at), a.root.eval(p, at); got != want {
					t.Errorf("profile %d at %d: audience %s = %v packed, %v unpacked", u, at, a.id, got, want)
				}
			}
		}
		if q.packed == "" && (len(p.events()) > 0 || len(p.aggs()) > 0) {
			t.Fatal("reading unpacked the profile")
		}
	}
}

// TestPackedLimits: a profile whose packed form would be longer than maxPacked (a heavy
// user's buckets) stays unpacked; a profile without counters or aggregates has no packed form;
// an event name beyond the numbered names is written out in its entry.
func TestPackedLimits(t *testing.T) {
	m := compileYAML(t, `computedTraits: [{id: n, name: N, source: engage, count: {event: Viewed, within: 24h}}]`)
	const now = 1_700_000_000_000
	heavy := newUserProfile("heavy")
	for i := range 1440 { // a bucket a minute
		track(m, heavy, "Viewed", `{}`, now-int64(i)*minute, now)
	}
	heavy.pack()
	if heavy.packed != "" || len(heavy.events()) != 1 {
		t.Errorf("a profile of 1,440 buckets packed (%d bytes)", len(heavy.packed))
	}
	bare := newUserProfile("bare")
	bare.pack()
	if bare.packed != "" {
		t.Errorf("a profile without counters packed: %q", bare.packed)
	}

	// A name without a number (the table full): written out.
	var w packer
	name := unique.Make("never numbered " + fmt.Sprint(rand.Int()))
	setMax := func(n int) (old int) {
		packedNames.mu.Lock()
		defer packedNames.mu.Unlock()
		old, maxNames = maxNames, n
		return old
	}
	defer setMax(setMax(0))
	if _, ok := nameNumber(name); ok {
		t.Fatal("a name numbered beyond the table")
	}
	p := newUserProfile("u")
	p.lists().Events = []named{{Name: name, counter: counter{Total: 2, Buckets: []count{{At: 3, N: 2}}}}}
	want := string(p.appendJSON(nil))
	w.b = packEntries(nil, p.events(), nil)
	if !strings.Contains(string(w.b), name.Value()) {
		t.Fatalf("the name is not written out: %q", w.b)
	}
	p.pack()
	if got := string(p.appendJSON(nil)); got != want {
		t.Errorf("packed with its name written out:\n%s\nwant\n%s", got, want)
	}
	if c, ok := p.counterView(name.Value()); !ok || c.total(0, now) != 2 {
		t.Errorf("counter of a name written out: %v", c)
	}
}

// TestChangelogPacksProfiles: the profiles a batch changed are packed once their changelog
// records are written; an event unpacks its profile, which the next changelog packs again;
// the record and the rules' answers are the same packed or not.
func TestChangelogPacksProfiles(t *testing.T) {
	s, part, bt := newBenchService(t)
	now := time.Now()
	send := func(raw string) {
		m, err := schemas.DecodeMessage([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		s.handleMessage(bt, 0, part, m, nil, "", now)
	}
	order := func(id string, revenue int) string {
		return fmt.Sprintf(`{"type":"track","userId":"u1","messageId":%q,"event":"Order Completed","properties":{"revenue":%d},"timestamp":%q}`,
			id, revenue, now.UTC().Format(time.RFC3339Nano))
	}
	spend := s.model.traitByID["spend"]
	send(order("m1", 120))
	prof := part.profiles["u1"]
	if prof == nil || prof.l == nil || prof.packed != "" {
		t.Fatalf("after an event, before its changelog: %+v", prof)
	}
	recs := s.changelog(nil, 0, part)
	if prof.packed == "" || prof.l != nil {
		t.Fatalf("not packed once written (%d records)", len(recs))
	}
	var back profile
	if err := json.Unmarshal(recs[0].Value, &back); err != nil || string(back.appendJSON(nil)) != string(prof.appendJSON(nil)) {
		t.Fatalf("the record %s is not the packed profile %s (%v)", recs[0].Value, prof.appendJSON(nil), err)
	}
	if got := spend.value(prof, now.UnixMilli()); !got.equal(numVal(120)) {
		t.Errorf("spend read packed = %s, want 120", got.appendJSON(nil))
	}
	send(order("m2", 30))
	if prof.packed != "" || prof.l == nil {
		t.Fatal("an event did not unpack its profile")
	}
	s.changelog(nil, 0, part)
	if prof.packed == "" {
		t.Fatal("not packed again once written")
	}
	if got := spend.value(prof, now.UnixMilli()); !got.equal(numVal(150)) {
		t.Errorf("spend after two orders = %s, want 150", got.appendJSON(nil))
	}
}

// TestChangelogsSideBySide: the changelog records of several partitions encoded side by side
// (changelogs, one goroutine a partition; run under -race) are those each partition's
// changelog writes on its own, every value with no spare capacity (values share chunks: one
// must not be appended to over the next), and every profile is packed once written.
func TestChangelogsSideBySide(t *testing.T) {
	const nparts = 4
	now := time.Now()
	build := func() (*Service, map[int32]*partition) {
		t.Helper()
		s, _, _ := newBenchService(t)
		s.nparts = nparts
		parts := map[int32]*partition{}
		for p := range int32(nparts) {
			parts[p] = &partition{restored: true, profiles: map[string]*profile{}, meta: partMeta{Defs: map[string]metaDef{}}}
		}
		s.parts = parts
		bt := &batch{now: now.UnixMilli(), touched: map[int32]*partition{}}
		r := rand.New(rand.NewPCG(1, 2))
		for i := range 3000 {
			m, err := schemas.DecodeMessage([]byte(benchEvent(r, i, 500)))
			if err != nil {
				t.Fatal(err)
			}
			p := s.partitionOf(m.Key())
			s.handleMessage(bt, p, parts[p], m, nil, "", now)
		}
		parts[1].markDirty("gone") // a profile removed: a tombstone
		return s, parts
	}
	s, parts := build()
	want := map[string]string{}
	dirty := map[int32][]string{}
	for p, part := range parts {
		for id := range part.dirty {
			dirty[p] = append(dirty[p], id)
		}
		for _, r := range s.changelog(nil, p, part) {
			want[fmt.Sprint(r.Partition, "/", string(r.Key))] = string(r.Value)
		}
	}
	// The same profiles again, packed now (their records are the same: TestChangelogPacksProfiles).
	for p, ids := range dirty {
		for _, id := range ids {
			parts[p].markDirty(id)
		}
	}
	got := s.changelogs(nil, parts)
	if len(got) != len(want) || len(want) < 500 {
		t.Fatalf("%d records side by side, %d one partition at a time", len(got), len(want))
	}
	for _, r := range got {
		k := fmt.Sprint(r.Partition, "/", string(r.Key))
		if w, ok := want[k]; !ok || w != string(r.Value) {
			t.Fatalf("%s: %s, want %s", k, r.Value, w)
		}
		if cap(r.Value) != len(r.Value) {
			t.Fatalf("%s: capacity %d for %d bytes", k, cap(r.Value), len(r.Value))
		}
		if r.Value == nil && string(r.Key) != "gone" {
			t.Fatalf("%s: a tombstone", k)
		}
	}
	for p, part := range parts {
		if part.dirty != nil {
			t.Errorf("partition %d: dirty set not cleared", p)
		}
		for id, prof := range part.profiles {
			if len(prof.events())+len(prof.aggs()) > 0 && prof.packed == "" {
				t.Errorf("%s not packed once written", id)
			}
		}
	}
}
