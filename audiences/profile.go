package audiences

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unique"

	"github.com/tributary-cdp/tributary/schemas"
)

// Profile limits (docs/audiences.md#memory).
const (
	// maxEventNames bounds the track event names counted per profile (beyond: not counted).
	maxEventNames = 100
	// maxMerged bounds the anonymous ids a profile remembers having merged.
	maxMerged = 16
	// mostFrequentCap bounds the distinct values a mostFrequent trait counts per profile.
	mostFrequentCap = 50
)

// profile is one user's state: the value of one audiences.state record. Its changelog
// JSON (docs/topics.md#audiencesstate) is profileJSON; the layout in memory is another,
// smaller one (docs/audiences.md#memory): what few profiles have (a user id or anonymous id
// that is not the key, merged ids, kept events) hangs from one pointer, allocated only when
// used.
type profile struct {
	// ID is the key: the userId, or the anonymousId of an anonymous profile.
	ID        string
	Traits    traits
	FirstSeen int64 // ms
	LastSeen  int64 // ms
	// l holds the counter of each track event name and the state of each config aggregate
	// (docs/audiences.md) while the profile is unpacked (nil: none, or packed); once its
	// changelog record is written they are packed into packed (packed.go,
	// docs/audiences.md#memory). Code that changes them unpacks the profile first (agg,
	// eventSeries); rules read either form (aggView, counterView).
	l      *lists
	packed string
	Synced syncedList // what the last sync sent
	// Identity holds the profile's external ids and its merges and refusals
	// (docs/audiences.md#identity-resolution); nil until it has any.
	Identity *identity
	// into: this id was merged into that profile (mergedInto); its events go there. A
	// pointer, set only in a redirect: 8 bytes in every profile instead of a string's 16.
	into *string
	// rare holds what few profiles have (nil: none of it).
	rare *profileRare
	// Recent are hashes (messageHash) of the last messages applied, a ring whose next slot
	// is RecentNext: a message seen again (a client's retry that ingest accepted twice) is
	// not counted twice (docs/audiences.md#what-a-profile-is-built-from).
	Recent     [recentMessages]hash
	RecentNext uint8
	// Suppressed: a SUPPRESS deletion request; no profile is built until UNSUPPRESS.
	Suppressed bool
	// ids says which of the user id and the anonymous id are the ID (the usual case, which
	// keeps no other string); another value is in rare.
	ids idKinds
}

// lists are a profile's counters and aggregates, unpacked.
type lists struct {
	Events []named // per track event name
	Aggs   []agg   // per config aggregate
}

// lists is p.l, allocated when p has none.
func (p *profile) lists() *lists {
	if p.l == nil {
		p.l = &lists{}
	}
	return p.l
}

// events are the counters of an unpacked profile (unpack first to change them; none while it
// is packed).
func (p *profile) events() []named {
	if p.l == nil {
		return nil
	}
	return p.l.Events
}

// aggs are the aggregates of an unpacked profile (unpack first to change them; none while it
// is packed).
func (p *profile) aggs() []agg {
	if p.l == nil {
		return nil
	}
	return p.l.Aggs
}

// idKinds says which ids of a profile are its ID.
type idKinds uint8

const (
	userIsID idKinds = 1 << iota // the userId is the ID
	anonIsID                     // the anonymousId is the ID
)

// profileRare is what few profiles have, apart from the fields every profile has.
type profileRare struct {
	// UserID and AnonymousID: the ids when they are not the profile's ID.
	UserID, AnonymousID string
	// Merged are the anonymous ids merged into this profile.
	Merged []string
	// Tracks are the recent track events kept for the Profile API (tracks.go); none unless
	// AUDIENCES_PROFILE_EVENTS > 0.
	Tracks []tracked
}

// more is p.rare, allocated when p has none.
func (p *profile) more() *profileRare {
	if p.rare == nil {
		p.rare = &profileRare{}
	}
	return p.rare
}

// tidy drops p.rare when it holds nothing.
func (p *profile) tidy() {
	if r := p.rare; r != nil && r.UserID == "" && r.AnonymousID == "" && len(r.Merged) == 0 && len(r.Tracks) == 0 {
		p.rare = nil
	}
}

// userID is the profile's userId ("": anonymous).
func (p *profile) userID() string {
	switch {
	case p.ids&userIsID != 0:
		return p.ID
	case p.rare != nil:
		return p.rare.UserID
	}
	return ""
}

// anonymousID is the profile's anonymousId, if it keeps one.
func (p *profile) anonymousID() string {
	switch {
	case p.ids&anonIsID != 0:
		return p.ID
	case p.rare != nil:
		return p.rare.AnonymousID
	}
	return ""
}

// setIDs sets the profile's userId and anonymousId: a flag for one that is its ID, else in
// rare.
func (p *profile) setIDs(userID, anonymousID string) {
	p.ids = 0
	if p.rare != nil {
		p.rare.UserID, p.rare.AnonymousID = "", ""
	}
	switch {
	case userID == "":
	case userID == p.ID:
		p.ids |= userIsID
	default:
		p.more().UserID = userID
	}
	switch {
	case anonymousID == "":
	case anonymousID == p.ID:
		p.ids |= anonIsID
	default:
		p.more().AnonymousID = anonymousID
	}
	p.tidy()
}

// merged are the anonymous ids merged into this profile.
func (p *profile) merged() []string {
	if p.rare == nil {
		return nil
	}
	return p.rare.Merged
}

// newUserProfile is a new profile of a user id.
func newUserProfile(id string) *profile { return &profile{ID: id, ids: userIsID} }

// newAnonProfile is a new profile of an anonymous id.
func newAnonProfile(id string) *profile { return &profile{ID: id, ids: anonIsID} }

// newRedirect is the redirect of an id merged into the profile into.
func newRedirect(id, into string) *profile { return &profile{ID: id, into: &into} }

// mergedInto is the profile this id was merged into ("": none, p is no redirect).
func (p *profile) mergedInto() string {
	if p.into == nil {
		return ""
	}
	return *p.into
}

// profileJSON is the changelog form of a profile (docs/topics.md#audiencesstate). The lists
// whose elements hold shared handles (events, aggs, synced) are read in their changelog form
// and converted once, rather than each element through a json.Unmarshal of its own (a
// restore reads millions).
type profileJSON struct {
	ID          string               `json:"id"`
	UserID      string               `json:"userId,omitempty"`
	AnonymousID string               `json:"anonymousId,omitempty"`
	Traits      traits               `json:"traits,omitempty"`
	FirstSeen   int64                `json:"firstSeen,omitempty"`
	LastSeen    int64                `json:"lastSeen,omitempty"`
	Events      []namedJSON          `json:"events,omitempty"`
	Aggs        []aggJSON            `json:"aggs,omitempty"`
	Synced      []sentJSON           `json:"synced,omitempty"`
	Merged      []string             `json:"merged,omitempty"`
	Tracks      []tracked            `json:"tracks,omitempty"`
	Identity    *identity            `json:"identity,omitempty"`
	MergedInto  string               `json:"mergedInto,omitempty"`
	Recent      [recentMessages]hash `json:"recent"`
	RecentNext  uint8                `json:"recentNext,omitempty"`
	Suppressed  bool                 `json:"suppressed,omitempty"`
}

// UnmarshalJSON reads a profile from its changelog JSON (profileJSON).
func (p *profile) UnmarshalJSON(b []byte) error {
	var j profileJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = profile{ID: j.ID, Traits: j.Traits, FirstSeen: j.FirstSeen, LastSeen: j.LastSeen, Identity: j.Identity,
		Recent: j.Recent, RecentNext: j.RecentNext, Suppressed: j.Suppressed}
	p.setIDs(j.UserID, j.AnonymousID)
	if into := j.MergedInto; into != "" {
		p.into = &into
	}
	if len(j.Merged) > 0 {
		p.more().Merged = j.Merged
	}
	if len(j.Tracks) > 0 {
		p.more().Tracks = j.Tracks
	}
	if len(j.Events) > 0 {
		l := p.lists()
		l.Events = make([]named, len(j.Events))
		for i, e := range j.Events {
			l.Events[i] = named{Name: unique.Make(e.Name), counter: e.counter}
		}
	}
	if len(j.Aggs) > 0 {
		l := p.lists()
		l.Aggs = make([]agg, len(j.Aggs))
		for i := range j.Aggs {
			l.Aggs[i].fromJSON(&j.Aggs[i])
		}
	}
	if len(j.Synced) > 0 {
		words := len(j.Synced) // one each, two more with a hash
		for _, e := range j.Synced {
			if e.H != 0 {
				words += 2
			}
		}
		p.Synced = make(syncedList, 0, words)
		for _, e := range j.Synced {
			p.Synced = appendSynced(p.Synced, e.ID, e.Version, e.H)
		}
	}
	return nil
}

// recentMessages is how many message ids a profile remembers for de-duplication.
const recentMessages = 4

// messageHash is the FNV-1a hash of a message id; 0 (no id) is never remembered.
func messageHash(id string) hash {
	if id == "" {
		return 0
	}
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	return hash(h)
}

// repeated reports whether the message with hash h was applied to p lately, and remembers
// it if not.
func (p *profile) repeated(h hash) bool {
	if h == 0 {
		return false
	}
	for _, r := range p.Recent {
		if r == h {
			return true
		}
	}
	p.Recent[p.RecentNext%recentMessages] = h
	p.RecentNext = (p.RecentNext + 1) % recentMessages
	return false
}

// active reports whether p is a profile (not a redirect or a suppression marker).
func (p *profile) active() bool { return p.mergedInto() == "" && !p.Suppressed }

// named is the counter of one track event name.
type named struct {
	Name sym
	counter
}

// sym is a string that many profiles hold (an event name, an aggregate's key), shared: every
// profile holds an 8-byte handle to one copy (unique.Make) instead of a 16-byte string
// (docs/audiences.md#memory).
type sym = unique.Handle[string]

// namedJSON is the changelog form of a named counter.
type namedJSON struct {
	Name string `json:"name"`
	counter
}

func (n named) MarshalJSON() ([]byte, error) {
	return json.Marshal(namedJSON{n.Name.Value(), n.counter})
}

func (n *named) UnmarshalJSON(b []byte) error {
	var j namedJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	n.Name, n.counter = unique.Make(j.Name), j.counter
	return nil
}

// agg is the state of one aggregate of the config (aggDef), keyed by its definition, so that
// it survives config changes that keep it.
//
// Its state is one pointer, to what its class keeps: a *series (count, sum, avg, min, max), a
// first and last value (fl: a *firstLast, or one *stamped while they are the same), the
// values of a mostFrequent (freq) or uniqueList (val) in a list (listOf); nil until first
// written. An aggregate is 24 bytes and its state holds nothing it does not use: a last value
// is one 48- or 80-byte allocation, not a 64-byte holder of four kinds and two 48-byte values
// (docs/audiences.md#memory). The JSON has the fields of every kind, flat.
type agg struct {
	Key sym
	st  any
}

// firstLast is the earliest and the latest value of a first/last aggregate when they differ:
// both are set by its first event (setFL).
type firstLast struct{ First, Last stamped }

type (
	freqList []freq
	valList  []val
)

// A list of a mostFrequent's or a uniqueList's values is held as an array when it has one or
// two (*[1]T, *[2]T: most profiles), else as a slice (*L): an array needs no slice header, 24
// bytes of a list's state (docs/audiences.md#memory).

// listOf is the list that state st holds (nil: none).
func listOf[T any, L ~[]T](st any) []T {
	switch x := st.(type) {
	case *[1]T:
		return x[:]
	case *[2]T:
		return x[:]
	case *L:
		return *x
	}
	return nil
}

// listState is the state that holds list l.
func listState[T any, L ~[]T](l []T) any {
	switch len(l) {
	case 0:
		return nil
	case 1:
		return &[1]T{l[0]}
	case 2:
		return &[2]T{l[0], l[1]}
	}
	x := L(l)
	return &x
}

// listAppend is the state st (a list) with v added last.
func listAppend[T any, L ~[]T](st any, v T) any {
	switch x := st.(type) {
	case *[1]T:
		return &[2]T{x[0], v}
	case *[2]T:
		l := L{x[0], x[1], v}
		return &l
	case *L:
		*x = appendOne(*x, v)
		return x
	}
	return &[1]T{v}
}

// ser is the aggregate's series (nil: none).
func (a *agg) ser() *series { s, _ := a.st.(*series); return s }

// serRW is the aggregate's series, made when it has none.
func (a *agg) serRW() *series {
	if s := a.ser(); s != nil {
		return s
	}
	s := &series{}
	a.st = s
	return s
}

// fl is the aggregate's first and last value (ok false: none yet).
func (a *agg) fl() (first, last stamped, ok bool) {
	switch x := a.st.(type) {
	case *stamped:
		return *x, *x, true
	case *firstLast:
		return x.First, x.Last, true
	}
	return stamped{}, stamped{}, false
}

// setFL sets the aggregate's first and last value. While they are the same (one event so
// far, the most common case) the state is that one value (48 bytes instead of 80,
// docs/audiences.md#memory). A state of the same form is changed in place.
func (a *agg) setFL(first, last stamped) {
	if first.same(last) {
		if x, ok := a.st.(*stamped); ok {
			*x = first
		} else {
			a.st = &first
		}
		return
	}
	if x, ok := a.st.(*firstLast); ok {
		x.First, x.Last = first, last
	} else {
		a.st = &firstLast{First: first, Last: last}
	}
}

// freqs are the value frequencies of a mostFrequent aggregate.
func (a *agg) freqs() []freq { return listOf[freq, freqList](a.st) }

// uniques are the values of a uniqueList aggregate.
func (a *agg) uniques() []val { return listOf[val, valList](a.st) }

// aggJSON is the flat changelog form of an aggregate.
type aggJSON struct {
	Key   string   `json:"key"`
	S     *series  `json:"series,omitempty"` // count, sum, avg, min, max
	First *stamped `json:"first,omitempty"`
	Last  *stamped `json:"last,omitempty"`
	Freq  []freq   `json:"freq,omitempty"`
	List  []val    `json:"list,omitempty"`
}

// MarshalJSON is appendJSON, for json.Marshal.
func (a agg) MarshalJSON() ([]byte, error) { return a.appendJSON(nil), nil }

// UnmarshalJSON reads the flat JSON of an aggregate. A first/last aggregate with one of the
// two (written by hand; the service writes both) takes it for both.
func (a *agg) UnmarshalJSON(b []byte) error {
	var j aggJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	a.fromJSON(&j)
	return nil
}

// fromJSON sets the aggregate from its changelog form.
func (a *agg) fromJSON(j *aggJSON) {
	a.Key, a.st = unique.Make(j.Key), nil
	switch {
	case j.S != nil:
		a.st = j.S
	case j.First != nil || j.Last != nil:
		first, last := j.First, j.Last
		if first == nil {
			first = last
		}
		if last == nil {
			last = first
		}
		a.setFL(*first, *last)
	case len(j.Freq) > 0:
		a.st = listState[freq, freqList](j.Freq)
	case len(j.List) > 0:
		a.st = listState[val, valList](j.List)
	}
}

type stamped struct {
	V  val   `json:"v"`
	At int64 `json:"at"`
}

// same reports whether s and o are the same value at the same time, as written (a number's
// bits, not its value: -0 is not 0).
func (s stamped) same(o stamped) bool {
	return s.At == o.At && s.V.k == o.V.k && math.Float64bits(s.V.f) == math.Float64bits(o.V.f) && s.V.s == o.V.s
}

type freq struct {
	V     val    `json:"v"`
	N     uint32 `json:"n"`
	First int64  `json:"at"`
}

// hash is a valueHash; its JSON is 16 hex digits (a JSON number would lose bits).
type hash uint64

func (h hash) MarshalJSON() ([]byte, error) { return h.appendJSON(nil), nil }

func (h hash) appendJSON(b []byte) []byte {
	b = append(b, '"')
	b = strconv.AppendUint(b, uint64(h), 16)
	return append(b, '"')
}

func (h *hash) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	n, err := strconv.ParseUint(s, 16, 64)
	*h = hash(n)
	return err
}

// valueHash is the FNV-1a hash of v's JSON (a collision, which would leave one change of a
// computed trait unsent, has a chance of 2^-64).
func valueHash(v val) hash {
	var buf [64]byte
	h := uint64(14695981039346656037)
	for _, c := range v.appendJSON(buf[:0]) {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return hash(h)
}

// traits is an ordered list of (key, value): smaller than a map per profile.
type traits []traitKV

type traitKV struct {
	K string
	V val
}

func (t traits) get(k string) val {
	for i := range t {
		if t[i].K == k {
			return t[i].V
		}
	}
	return null
}

// set sets k to v; null removes it.
func (t *traits) set(k string, v val) {
	for i := range *t {
		if (*t)[i].K == k {
			if v.isNull() {
				*t = slices.Delete(*t, i, i+1)
			} else {
				(*t)[i].V = v
			}
			return
		}
	}
	if !v.isNull() {
		*t = appendOne(*t, traitKV{k, v})
	}
}

// MarshalJSON writes the traits as one object, in their order.
func (t traits) MarshalJSON() ([]byte, error) { return t.appendJSON(nil), nil }

func (t traits) appendJSON(b []byte) []byte {
	b = append(b, '{')
	for i, kv := range t {
		if i > 0 {
			b = append(b, ',')
		}
		b = schemas.AppendJSONString(b, kv.K)
		b = append(b, ':')
		b = kv.V.appendJSON(b)
	}
	return append(b, '}')
}

// UnmarshalJSON reads the traits in the order of the text, the order MarshalJSON wrote them
// in, so that a profile restored from audiences.state is the profile that was written.
func (t *traits) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	*t = (*t)[:0]
	if tok == nil {
		return nil // null
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("traits: want an object, got %v", tok)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		t.set(k.(string), parseVal(raw))
	}
	_, err = dec.Token() // the closing brace
	return err
}

// mergeTraits sets every trait of obj (a JSON object): later wins, null removes.
func (p *profile) mergeTraits(obj json.RawMessage, in *interner) {
	if len(bytes.TrimSpace(obj)) == 0 {
		return
	}
	m, err := schemas.ParseMembers(obj)
	if err != nil {
		return
	}
	// New keys in the order of their names, so that the same traits make the same profile
	// whatever their order in the message; a repeated key: the last one wins, as in
	// encoding/json.
	var kvs []traitKV
	m.Each(func(k string, v json.RawMessage) { kvs = append(kvs, traitKV{in.str(k), in.parseVal(v)}) })
	slices.SortStableFunc(kvs, func(a, b traitKV) int { return strings.Compare(a.K, b.K) })
	for _, kv := range kvs {
		p.Traits.set(kv.K, kv.V)
	}
}

// eventSeries is the counter of the event name, to change (the profile unpacked); nil: none,
// and not made (!create, or maxEventNames reached).
func (p *profile) eventSeries(name string, create bool) *counter {
	p.unpack()
	events := p.events()
	for i := range events {
		if events[i].Name.Value() == name {
			return &events[i].counter
		}
	}
	if !create || len(events) >= maxEventNames {
		return nil
	}
	l := p.lists()
	l.Events = appendOne(l.Events, named{Name: unique.Make(name)})
	return &l.Events[len(l.Events)-1].counter
}

// agg is the aggregate of key, to change (the profile unpacked); nil: none, and not made.
func (p *profile) agg(key sym, create bool) *agg {
	p.unpack()
	aggs := p.aggs()
	for i := range aggs {
		if aggs[i].Key == key {
			return &aggs[i]
		}
	}
	if !create {
		return nil
	}
	l := p.lists()
	l.Aggs = appendOne(l.Aggs, agg{Key: key})
	return &l.Aggs[len(l.Aggs)-1]
}

func (p *profile) seen(ms int64) {
	if p.FirstSeen == 0 || ms < p.FirstSeen {
		p.FirstSeen = ms
	}
	if ms > p.LastSeen {
		p.LastSeen = ms
	}
}

// absorb merges o (a profile merged into p: an anonymous one, or the previous id of an alias)
// into p: p's traits win over o's, counts and buckets add up, first/last keep the earliest and
// the latest, frequencies add up. o's synced state is not taken: o's own identify calls stop.
func (p *profile) absorb(o *profile, now int64) {
	p.unpack()
	oEvents, oAggs := o.unpacked()
	for _, kv := range o.Traits {
		if p.Traits.get(kv.K).isNull() {
			p.Traits.set(kv.K, kv.V)
		}
	}
	if o.FirstSeen != 0 {
		p.seen(o.FirstSeen)
	}
	if o.LastSeen != 0 {
		p.seen(o.LastSeen) // (0 would become p's FirstSeen)
	}
	for i := range oEvents {
		if s := p.eventSeries(oEvents[i].Name.Value(), true); s != nil {
			s.merge(&oEvents[i].counter, now)
		}
	}
	for i := range oAggs {
		oa := &oAggs[i]
		a := p.agg(oa.Key, true)
		if s := oa.ser(); s != nil {
			a.serRW().merge(s, now)
		}
		if ofirst, olast, ok := oa.fl(); ok {
			first, last, ok := a.fl()
			if !ok || ofirst.At < first.At {
				first = ofirst
			}
			if !ok || olast.At > last.At {
				last = olast
			}
			a.setFL(first, last)
		}
		for _, f := range oa.freqs() {
			a.addFreq(f.V, f.N, f.First)
		}
		for _, v := range oa.uniques() {
			a.addUnique(v)
		}
	}
	if oa := o.anonymousID(); oa != "" && p.anonymousID() == "" && p.userID() == "" {
		p.setIDs("", oa)
	}
	for _, h := range o.Recent { // its messages' retries, handed on from now, stay duplicates
		p.repeated(h)
	}
	p.absorbTracks(o.tracks())
	p.absorbIdentity(o)
	p.addMerged(o.ID)
	for _, m := range o.merged() {
		p.addMerged(m)
	}
}

func (p *profile) addMerged(id string) {
	if id == "" || id == p.ID || slices.Contains(p.merged(), id) {
		return
	}
	r := p.more()
	if len(r.Merged) >= maxMerged {
		r.Merged = slices.Delete(r.Merged, 0, 1)
	}
	r.Merged = append(r.Merged, id)
}

func (a *agg) addFreq(v val, n uint32, at int64) {
	fs := a.freqs()
	for i := range fs {
		if f := &fs[i]; f.V.equal(v) {
			f.N += n
			if at < f.First {
				f.First = at
			}
			return
		}
	}
	if len(fs) < mostFrequentCap {
		a.st = listAppend[freq, freqList](a.st, freq{V: v, N: n, First: at})
	}
}

func (a *agg) addUnique(v val) {
	vs := a.uniques()
	if len(vs) >= schemas.UniqueListCap {
		return
	}
	for _, have := range vs {
		if have.equal(v) {
			return
		}
	}
	a.st = listAppend[val, valList](a.st, v)
}

// appendOne appends v, growing a full slice by one element only, not by half or double as
// append does: a profile's slices are small and many, and spare capacity in a million
// profiles is hundreds of megabytes (docs/audiences.md#memory).
func appendOne[T any](s []T, v T) []T {
	if len(s) < cap(s) {
		return append(s, v)
	}
	out := make([]T, len(s)+1)
	copy(out, s)
	out[len(s)] = v
	return out
}

// insertOne is slices.Insert of one element, growing a full slice by one element only (see
// appendOne).
func insertOne[T any](s []T, i int, v T) []T {
	if len(s) < cap(s) {
		return slices.Insert(s, i, v)
	}
	out := make([]T, len(s)+1)
	copy(out, s[:i])
	out[i] = v
	copy(out[i+1:], s[i:])
	return out
}
