package audiences

import (
	"encoding/binary"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"unique"
)

// The packed form of a profile's event counters and aggregates (docs/audiences.md#memory).
//
// Unpacked, a profile's counters and aggregates (lists: Events, Aggs) are lists of typed
// entries, each state and each list of buckets or values an allocation of its own: about 370
// bytes in 8 allocations for a profile of the benchmark's shape, each rounded to its size
// class. Once the batch that changed a profile has written it to the changelog, they are
// packed into one string (profile.packed), about 75 bytes: entries one after the other, each
//
//	tag (1 byte) | name | body length (uvarint) | body
//
// where name is the uvarint of the name's number + 1 (names: event names and aggregate keys,
// numbered once per process), or 0 followed by the uvarint length and the bytes of a name
// that has no number (the table is full). The bodies, by tag:
//
//	packedCounter   total, then per bucket: minute, count
//	packedSeries    total, then per bucket: minute, count, stats (a byte: 0 none, 1 one value
//	                that is the sum, min and max, 2 three values), the values (float64 bits,
//	                8 bytes each, little-endian)
//	packedOne       one value: the first and the last of a first/last aggregate (stamped)
//	packedTwo       the first and the last value (stamped, stamped)
//	packedFreq      per value: val, count (uvarint), first seen (varint)
//	packedList      per value: val
//	packedEmpty     nothing (an aggregate without state)
//
// A bucket's minute is a varint for the first bucket, then the uvarint of its distance from
// the one before (buckets ascend); totals and counts are uvarints; a stamped is a val and its
// time (varint ms); a val is its kind (a byte), then for a number its float64 bits (8 bytes),
// for a bool one byte, for a string or JSON its uvarint length and bytes.
//
// Rules read the packed form as it is (the sync reads every profile; packedSeries and the
// readers of aggView); what changes a profile's counters or aggregates unpacks it first
// (profile.unpack: the typed lists again, read from the string), and the changelog packs it
// again once written (profile.pack). A profile whose packed form would be longer than
// maxPacked (a heavy user's hundreds or thousands of buckets) stays unpacked: rewriting it on
// each of its events would cost more than the memory it saves. Packing a packed profile does
// nothing; the changelog record is the same JSON either way (docs/topics.md#audiencesstate).

// maxPacked is the longest packed form kept; a profile whose form is longer stays unpacked.
const maxPacked = 1024

// Tags of packed entries.
const (
	packedCounter byte = iota + 1
	packedSeries
	packedOne
	packedTwo
	packedFreq
	packedList
	packedEmpty
)

// maxNames bounds the names numbered for packed entries; a name beyond is written out in
// each entry (event names come from clients: the table must not grow without bound). Guarded
// by packedNames.mu.
var maxNames = 1 << 16

// packedNames numbers the names of packed entries (event names and aggregate keys), once per
// process: an entry holds its name's number (one to three bytes) instead of the name. A number
// is never reused and a name never forgotten; numbers are read without a lock (syms is
// replaced, never changed, when a name is added), as syncKeys.
var packedNames = struct {
	mu      sync.Mutex
	numbers map[sym]uint32
	syms    atomic.Pointer[[]sym]
}{numbers: map[sym]uint32{}}

// nameNumber is the number of name (given one when it has none and the table has room); ok
// false: it has none.
func nameNumber(name sym) (uint32, bool) {
	packedNames.mu.Lock()
	defer packedNames.mu.Unlock()
	if n, ok := packedNames.numbers[name]; ok {
		return n, true
	}
	var syms []sym
	if old := packedNames.syms.Load(); old != nil {
		syms = append(syms, *old...)
	}
	if len(syms) >= maxNames {
		return 0, false
	}
	n := uint32(len(syms))
	syms = append(syms, name)
	packedNames.syms.Store(&syms)
	packedNames.numbers[name] = n
	return n, true
}

// nameOf is the name numbered n.
func nameOf(n uint32) sym { return (*packedNames.syms.Load())[n] }

// packer appends the packed form of entries to b.
type packer struct{ b []byte }

func (w *packer) uvarint(x uint64) { w.b = binary.AppendUvarint(w.b, x) }
func (w *packer) varint(x int64)   { w.b = binary.AppendVarint(w.b, x) }
func (w *packer) float(f float64) {
	w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(f))
}

func (w *packer) str(s string) {
	w.uvarint(uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *packer) val(v val) {
	w.b = append(w.b, byte(v.k))
	switch v.k {
	case kNumber:
		w.float(v.f)
	case kBool:
		w.b = append(w.b, byte(b2f(v.f != 0)))
	case kString, kRaw:
		w.str(v.s)
	}
}

func (w *packer) stamped(s stamped) {
	w.val(s.V)
	w.varint(s.At)
}

// entry appends an entry's tag and name, then its body (written by body), then sets the
// body's length before it.
func (w *packer) entry(tag byte, name sym, body func()) {
	w.b = append(w.b, tag)
	if n, ok := nameNumber(name); ok {
		w.uvarint(uint64(n) + 1)
	} else {
		w.uvarint(0)
		w.str(name.Value())
	}
	at := len(w.b)
	body()
	// The body's length goes before the body: it is moved by the length's size.
	var lb [binary.MaxVarintLen64]byte
	l := binary.PutUvarint(lb[:], uint64(len(w.b)-at))
	w.b = append(w.b, lb[:l]...)
	copy(w.b[at+l:], w.b[at:len(w.b)-l])
	copy(w.b[at:], lb[:l])
}

// counter appends an event counter's body.
func (w *packer) counter(c *counter) {
	w.uvarint(c.Total)
	for i, k := range c.Buckets {
		w.minute(i, k.At, c.Buckets)
		w.uvarint(uint64(k.N))
	}
}

// minute appends the minute of the i-th bucket: itself for the first, else its distance from
// the one before.
func (w *packer) minute(i int, at int32, buckets any) {
	if i == 0 {
		w.varint(int64(at))
		return
	}
	var prev int32
	switch bs := buckets.(type) {
	case []count:
		prev = bs[i-1].At
	case []bucket:
		prev = bs[i-1].At
	}
	w.uvarint(uint64(int64(at) - int64(prev)))
}

// series appends an aggregate series' body.
func (w *packer) series(s *series) {
	w.uvarint(s.Total)
	for i, k := range s.Buckets {
		w.minute(i, k.At, s.Buckets)
		w.uvarint(uint64(k.N))
		sum, lo, hi := math.Float64bits(k.Sum), math.Float64bits(k.Min), math.Float64bits(k.Max)
		switch {
		case sum == 0 && lo == 0 && hi == 0:
			w.b = append(w.b, 0)
		case sum == lo && lo == hi:
			w.b = append(w.b, 1)
			w.float(k.Sum)
		default:
			w.b = append(w.b, 2)
			w.float(k.Sum)
			w.float(k.Min)
			w.float(k.Max)
		}
	}
}

// agg appends an aggregate's entry.
func (w *packer) agg(a *agg) {
	switch x := a.st.(type) {
	case *series:
		w.entry(packedSeries, a.Key, func() { w.series(x) })
	case *stamped:
		w.entry(packedOne, a.Key, func() { w.stamped(*x) })
	case *firstLast:
		w.entry(packedTwo, a.Key, func() { w.stamped(x.First); w.stamped(x.Last) })
	case nil:
		w.entry(packedEmpty, a.Key, func() {})
	default:
		if fs := a.freqs(); fs != nil {
			w.entry(packedFreq, a.Key, func() {
				for _, f := range fs {
					w.val(f.V)
					w.uvarint(uint64(f.N))
					w.varint(f.First)
				}
			})
		} else {
			w.entry(packedList, a.Key, func() {
				for _, v := range a.uniques() {
					w.val(v)
				}
			})
		}
	}
}

// packEntries is the packed form of events and aggs, appended to b.
func packEntries(b []byte, events []named, aggs []agg) []byte {
	w := packer{b: b}
	for i := range events {
		w.entry(packedCounter, events[i].Name, func() { w.counter(&events[i].counter) })
	}
	for i := range aggs {
		w.agg(&aggs[i])
	}
	return w.b
}

// pack packs the profile's counters and aggregates (see above), unless their packed form is
// longer than maxPacked.
func (p *profile) pack() {
	if len(p.events()) == 0 && len(p.aggs()) == 0 {
		p.l = nil
		return
	}
	buf := packBufs.Get().(*[]byte)
	b := packEntries((*buf)[:0], p.events(), p.aggs())
	if len(b) <= maxPacked {
		p.packed, p.l = string(b), nil
	}
	*buf = b
	packBufs.Put(buf)
}

// packBufs are scratch buffers of pack.
var packBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// unpack makes the profile's counters and aggregates typed lists again (p.l), to be changed;
// the changelog packs them again.
func (p *profile) unpack() {
	if p.packed == "" {
		return
	}
	events, aggs := unpackEntries(p.packed)
	p.l, p.packed = &lists{Events: events, Aggs: aggs}, ""
}

// unpacked are the profile's counters and aggregates as typed lists, without unpacking the
// profile (for reading).
func (p *profile) unpacked() ([]named, []agg) {
	if p.packed == "" {
		return p.events(), p.aggs()
	}
	return unpackEntries(p.packed)
}

// unpackEntries reads a packed form. It allocates what a profile's entries hold together (the
// buckets of all counters in one array, those of all series in another, the series and the
// first/last values likewise), each entry's part of it with no spare room, so that it costs
// a few allocations rather than several per entry. The strings of values share the packed
// string's bytes: the typed lists are short-lived (packed again once written), and a
// profile that stays unpacked keeps at most its old packed form (maxPacked) with them.
func unpackEntries(s string) (events []named, aggs []agg) {
	var nev, nagg, ncounts, nbuckets, nseries, nstamped int
	for r := (reader{s: s}); r.more(); {
		tag, _, body := r.entry()
		switch tag {
		case packedCounter:
			nev++
			ncounts += countBuckets(body, false)
			continue
		case packedSeries:
			nseries++
			nbuckets += countBuckets(body, true)
		case packedOne:
			nstamped++
		}
		nagg++
	}
	events = make([]named, 0, nev)
	aggs = make([]agg, 0, nagg)
	counts := make([]count, ncounts)
	buckets := make([]bucket, nbuckets)
	sers := make([]series, nseries)
	stamps := make([]stamped, nstamped)
	for r := (reader{s: s}); r.more(); {
		tag, name, body := r.entry()
		br := reader{s: body}
		switch tag {
		case packedCounter:
			c := counter{Total: br.uvarint()}
			n := 0
			for it := (bucketIter{r: br}); it.next(false); n++ {
				counts[n] = count{At: it.b.At, N: it.b.N}
			}
			if n > 0 {
				c.Buckets, counts = counts[:n:n], counts[n:]
			}
			events = append(events, named{Name: name, counter: c})
			continue
		}
		a := agg{Key: name}
		switch tag {
		case packedSeries:
			s := &sers[0]
			sers = sers[1:]
			s.Total = br.uvarint()
			n := 0
			for it := (bucketIter{r: br}); it.next(true); n++ {
				buckets[n] = it.b
			}
			if n > 0 {
				s.Buckets, buckets = buckets[:n:n], buckets[n:]
			}
			a.st = s
		case packedOne:
			stamps[0] = br.stamped()
			a.st, stamps = &stamps[0], stamps[1:]
		case packedTwo:
			first := br.stamped()
			a.st = &firstLast{First: first, Last: br.stamped()}
		case packedFreq:
			a.st = unpackList[freq, freqList](br)
		case packedList:
			a.st = unpackList[val, valList](br)
		}
		aggs = append(aggs, a)
	}
	if nev == 0 {
		events = nil
	}
	if nagg == 0 {
		aggs = nil
	}
	return events, aggs
}

// countBuckets is the number of buckets in a counter's or series' body.
func countBuckets(body string, stats bool) (n int) {
	it := bucketIter{r: reader{s: body}}
	it.r.uvarint() // the total
	for it.next(stats) {
		n++
	}
	return n
}

// unpackList is the state (listState) of the list of values (freq or val) that r reads.
func unpackList[T freq | val, L ~[]T](r reader) any {
	read := func(r *reader) (x T) {
		switch p := any(&x).(type) {
		case *freq:
			*p = r.freq()
		case *val:
			*p = r.val()
		}
		return x
	}
	n := 0
	for c := r; c.more(); n++ {
		read(&c)
	}
	switch n {
	case 0:
		return nil
	case 1:
		return &[1]T{read(&r)}
	case 2:
		first := read(&r)
		return &[2]T{first, read(&r)}
	}
	l := make(L, n)
	for i := range l {
		l[i] = read(&r)
	}
	return &l
}

// reader reads a packed form (a valid one: only pack writes them). The strings it reads share
// the packed string's bytes.
type reader struct{ s string }

func (r *reader) more() bool { return len(r.s) > 0 }

func (r *reader) uvarint() uint64 {
	var x uint64
	for shift := 0; ; shift += 7 {
		c := r.s[0]
		r.s = r.s[1:]
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x
		}
	}
}

// varint reads a zig-zag varint (binary.AppendVarint).
func (r *reader) varint() int64 {
	u := r.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (r *reader) byte() byte {
	c := r.s[0]
	r.s = r.s[1:]
	return c
}

func (r *reader) float() float64 {
	var u uint64
	for i := 7; i >= 0; i-- {
		u = u<<8 | uint64(r.s[i])
	}
	r.s = r.s[8:]
	return math.Float64frombits(u)
}

func (r *reader) str() string {
	n := int(r.uvarint())
	s := r.s[:n]
	r.s = r.s[n:]
	return s
}

func (r *reader) val() val {
	v := val{k: kind(r.byte())}
	switch v.k {
	case kNumber:
		v.f = r.float()
	case kBool:
		v.f = float64(r.byte())
	case kString, kRaw:
		v.s = r.str()
	}
	return v
}

func (r *reader) stamped() stamped {
	v := r.val()
	return stamped{V: v, At: r.varint()}
}

func (r *reader) freq() freq {
	v := r.val()
	n := uint32(r.uvarint())
	return freq{V: v, N: n, First: r.varint()}
}

// entry reads the next entry: its tag, name and body.
func (r *reader) entry() (tag byte, name sym, body string) {
	tag = r.byte()
	if n := r.uvarint(); n > 0 {
		name = nameOf(uint32(n - 1))
	} else {
		name = unique.Make(r.str())
	}
	l := int(r.uvarint())
	body, r.s = r.s[:l], r.s[l:]
	return tag, name, body
}

// findPacked is the entry of the aggregate key in the packed form s: its tag and body.
func findPacked(s string, key sym) (tag byte, body string, ok bool) {
	r := reader{s: s}
	for r.more() {
		t, n, b := r.entry()
		if t != packedCounter && n == key {
			return t, b, true
		}
	}
	return 0, "", false
}

// findPackedCounter is the body of the counter of the event name in the packed form s.
func findPackedCounter(s string, name string) (body string, ok bool) {
	r := reader{s: s}
	for r.more() {
		t, n, b := r.entry()
		if t == packedCounter && n.Value() == name {
			return b, true
		}
	}
	return "", false
}

// bucketIter reads the buckets of a counter's or a series' body, after its total.
type bucketIter struct {
	r     reader
	b     bucket
	begun bool
}

// next reads the next bucket into it.b (with its stats for a series); false at the end.
func (it *bucketIter) next(stats bool) bool {
	if !it.r.more() {
		return false
	}
	if it.begun {
		it.b.At += int32(it.r.uvarint())
	} else {
		it.b.At, it.begun = int32(it.r.varint()), true
	}
	it.b.N = uint32(it.r.uvarint())
	if stats {
		switch it.r.byte() {
		case 0:
			it.b.Sum, it.b.Min, it.b.Max = 0, 0, 0
		case 1:
			f := it.r.float()
			it.b.Sum, it.b.Min, it.b.Max = f, f, f
		default:
			it.b.Sum, it.b.Min, it.b.Max = it.r.float(), it.r.float(), it.r.float()
		}
	}
	return true
}

// packedSeriesOf is a packed counter's or series' body, for reading as rules do (node.count).
type packedSeriesOf struct {
	body  string
	stats bool // a series (its buckets have stats), not a counter
}

// window counts the events of the buckets of the minutes [from, to), and sums their stats.
func (s packedSeriesOf) window(from, to int32) (total, n uint64, agg bucket) {
	it := bucketIter{r: reader{s: s.body}}
	total = it.r.uvarint()
	for it.next(s.stats) {
		if it.b.At >= to {
			break
		}
		if it.b.At >= from {
			n += uint64(it.b.N)
			mergeBucket(&agg, it.b)
		}
	}
	return total, n, agg
}

func (s packedSeriesOf) total(withinMs, now int64) uint64 {
	if withinMs == 0 {
		r := reader{s: s.body}
		return r.uvarint()
	}
	_, n, _ := s.window(minuteOf(now-withinMs), math.MaxInt32)
	return n
}

func (s packedSeriesOf) between(olderMs, newerMs, now int64) uint64 {
	_, n, _ := s.window(minuteOf(now-olderMs), minuteOf(now-newerMs))
	return n
}

// aggView is one aggregate of a profile, for reading: the typed one (a) of an unpacked
// profile, or the entry of a packed one (tag and body).
type aggView struct {
	a    *agg
	tag  byte
	body string
}

// aggView is the aggregate of key, for reading; ok false: the profile has none.
func (p *profile) aggView(key sym) (v aggView, ok bool) {
	if p.packed == "" {
		aggs := p.aggs()
		for i := range aggs {
			if aggs[i].Key == key {
				return aggView{a: &aggs[i]}, true
			}
		}
		return aggView{}, false
	}
	tag, body, ok := findPacked(p.packed, key)
	return aggView{tag: tag, body: body}, ok
}

// seriesView is an event counter or an aggregate's series, for reading as rules do
// (node.count): a typed one (c or s) or a packed one.
type seriesView struct {
	c      *counter
	s      *series
	packed packedSeriesOf
}

func (v seriesView) total(withinMs, now int64) uint64 {
	switch {
	case v.c != nil:
		return v.c.total(withinMs, now)
	case v.s != nil:
		return v.s.total(withinMs, now)
	}
	return v.packed.total(withinMs, now)
}

func (v seriesView) between(olderMs, newerMs, now int64) uint64 {
	switch {
	case v.c != nil:
		return v.c.between(olderMs, newerMs, now)
	case v.s != nil:
		return v.s.between(olderMs, newerMs, now)
	}
	return v.packed.between(olderMs, newerMs, now)
}

// counterView is the counter of the event name, for reading; ok false: none.
func (p *profile) counterView(name string) (v seriesView, ok bool) {
	if p.packed == "" {
		events := p.events()
		for i := range events {
			if events[i].Name.Value() == name {
				return seriesView{c: &events[i].counter}, true
			}
		}
		return seriesView{}, false
	}
	if body, ok := findPackedCounter(p.packed, name); ok {
		return seriesView{packed: packedSeriesOf{body: body}}, true
	}
	return seriesView{}, false
}

// hasSeries reports whether the aggregate has a series (count, sum, avg, min, max).
func (v aggView) hasSeries() bool {
	if v.a != nil {
		return v.a.ser() != nil
	}
	return v.tag == packedSeries
}

// series is the aggregate's series, for node.count (hasSeries first).
func (v aggView) series() seriesView {
	if v.a != nil {
		return seriesView{s: v.a.ser()}
	}
	return seriesView{packed: packedSeriesOf{body: v.body, stats: true}}
}

// window is windowOf of the aggregate's series (hasSeries first).
func (v aggView) window(withinMs, now int64) (n uint64, agg bucket) {
	if v.a != nil {
		return windowOf(v.a.ser(), withinMs, now)
	}
	from := int32(math.MinInt32)
	if withinMs > 0 {
		from = minuteOf(now - withinMs)
	}
	total, n, agg := packedSeriesOf{body: v.body, stats: true}.window(from, math.MaxInt32)
	if withinMs == 0 {
		n = total
	}
	return n, agg
}

// fl is the aggregate's first and last value (ok false: none).
func (v aggView) fl() (first, last stamped, ok bool) {
	if v.a != nil {
		return v.a.fl()
	}
	r := reader{s: v.body}
	switch v.tag {
	case packedOne:
		first = r.stamped()
		return first, first, true
	case packedTwo:
		first = r.stamped()
		return first, r.stamped(), true
	}
	return stamped{}, stamped{}, false
}

// eachFreq calls f with each value frequency of a mostFrequent aggregate, in their order.
func (v aggView) eachFreq(f func(freq)) {
	if v.a != nil {
		for _, x := range v.a.freqs() {
			f(x)
		}
		return
	}
	if v.tag == packedFreq {
		for r := (reader{s: v.body}); r.more(); {
			f(r.freq())
		}
	}
}

// eachUnique calls f with each value of a uniqueList aggregate, in their order.
func (v aggView) eachUnique(f func(val)) {
	if v.a != nil {
		for _, x := range v.a.uniques() {
			f(x)
		}
		return
	}
	if v.tag == packedList {
		for r := (reader{s: v.body}); r.more(); {
			f(r.val())
		}
	}
}

// anyAgg reports whether the profile has an aggregate whose key satisfies f, without
// unpacking it.
func (p *profile) anyAgg(f func(key sym) bool) bool {
	if p.packed == "" {
		return slices.ContainsFunc(p.aggs(), func(a agg) bool { return f(a.Key) })
	}
	for r := (reader{s: p.packed}); r.more(); {
		if tag, key, _ := r.entry(); tag != packedCounter && f(key) {
			return true
		}
	}
	return false
}
