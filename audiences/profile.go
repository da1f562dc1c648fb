package audiences

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// profile is one user's state: the value of one audiences.state record. Its JSON is the
// changelog format (docs/topics.md#audiencesstate).
type profile struct {
	// ID is the key: the userId, or the anonymousId of an anonymous profile.
	ID          string   `json:"id"`
	UserID      string   `json:"userId,omitempty"`
	AnonymousID string   `json:"anonymousId,omitempty"`
	Traits      traits   `json:"traits,omitempty"`
	FirstSeen   int64    `json:"firstSeen,omitempty"` // ms
	LastSeen    int64    `json:"lastSeen,omitempty"`  // ms
	Events      []named  `json:"events,omitempty"`    // per track event name
	Aggs        []agg    `json:"aggs,omitempty"`      // per config aggregate (docs/audiences.md)
	Synced      []sent   `json:"synced,omitempty"`    // what the last sync sent
	Merged      []string `json:"merged,omitempty"`    // anonymous ids merged into this profile
	// Tracks are the recent track events kept for the Profile API (tracks.go); nil unless
	// AUDIENCES_PROFILE_EVENTS > 0. A pointer: 8 bytes in every profile, not a slice's 24
	// (which would move a profile to the next size class, 32 bytes more).
	Tracks *[]tracked `json:"tracks,omitempty"`
	// Identity holds the profile's external ids and its merges and refusals
	// (docs/audiences.md#identity-resolution); nil until it has any.
	Identity *identity `json:"identity,omitempty"`
	// MergedInto: this anonymous id was merged into that profile; its events go there.
	MergedInto string `json:"mergedInto,omitempty"`
	// Recent are hashes (messageHash) of the last messages applied, a ring whose next slot
	// is RecentNext: a message seen again (a client's retry that ingest accepted twice) is
	// not counted twice (docs/audiences.md#what-a-profile-is-built-from).
	Recent     [recentMessages]hash `json:"recent"`
	RecentNext uint8                `json:"recentNext,omitempty"`
	// Suppressed: a SUPPRESS deletion request; no profile is built until UNSUPPRESS. (Beside
	// RecentNext: the two bytes share one word, which keeps a profile in its 256-byte size
	// class.)
	Suppressed bool `json:"suppressed,omitempty"`
}

// UnmarshalJSON reads a profile from its changelog JSON: the lists whose elements hold shared
// handles (events, aggs, synced) are read in their changelog form and converted once, rather
// than each element through a json.Unmarshal of its own (a restore reads millions).
func (p *profile) UnmarshalJSON(b []byte) error {
	type fields profile // the profile's fields, without this method
	var w struct {
		*fields
		Events []namedJSON `json:"events"`
		Aggs   []aggJSON   `json:"aggs"`
		Synced []sentJSON  `json:"synced"`
	}
	w.fields = (*fields)(p)
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	p.Events, p.Aggs, p.Synced = nil, nil, nil
	if len(w.Events) > 0 {
		p.Events = make([]named, len(w.Events))
		for i, e := range w.Events {
			p.Events[i] = named{Name: unique.Make(e.Name), counter: e.counter}
		}
	}
	if len(w.Aggs) > 0 {
		p.Aggs = make([]agg, len(w.Aggs))
		for i := range w.Aggs {
			p.Aggs[i].fromJSON(&w.Aggs[i])
		}
	}
	if len(w.Synced) > 0 {
		p.Synced = make([]sent, len(w.Synced))
		for i, e := range w.Synced {
			p.Synced[i] = newSent(e.ID, e.Version, e.H)
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
func (p *profile) active() bool { return p.MergedInto == "" && !p.Suppressed }

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
// *firstLast, a *freqList (mostFrequent) or a *valList (uniqueList); nil until first written.
// An aggregate is 24 bytes and its state holds nothing it does not use: a last value is one
// 80-byte allocation, not a 64-byte holder of four kinds and two 48-byte values
// (docs/audiences.md#memory). The JSON has the fields of every kind, flat.
type agg struct {
	Key sym
	st  any
}

// firstLast is the earliest and the latest value of a first/last aggregate: both are set by
// its first event.
type firstLast struct{ First, Last stamped }

type (
	freqList []freq
	valList  []val
)

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

// fl is the aggregate's first and last value (nil: none yet).
func (a *agg) fl() *firstLast { x, _ := a.st.(*firstLast); return x }

// freqs are the value frequencies of a mostFrequent aggregate.
func (a *agg) freqs() []freq {
	if x, ok := a.st.(*freqList); ok {
		return *x
	}
	return nil
}

// uniques are the values of a uniqueList aggregate.
func (a *agg) uniques() []val {
	if x, ok := a.st.(*valList); ok {
		return *x
	}
	return nil
}

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
		x := &firstLast{}
		if j.First != nil {
			x.First = *j.First
		} else {
			x.First = *j.Last
		}
		if j.Last != nil {
			x.Last = *j.Last
		} else {
			x.Last = *j.First
		}
		a.st = x
	case len(j.Freq) > 0:
		f := freqList(j.Freq)
		a.st = &f
	case len(j.List) > 0:
		l := valList(j.List)
		a.st = &l
	}
}

type stamped struct {
	V  val   `json:"v"`
	At int64 `json:"at"`
}

type freq struct {
	V     val    `json:"v"`
	N     uint32 `json:"n"`
	First int64  `json:"at"`
}

// sent is what the last sync sent for one audience or computed trait: for an audience, that
// the user is a member (only members are kept); for a computed trait, the value, as a hash of
// its JSON (valueHash): all a sync needs to tell whether the value changed, in 8 bytes
// instead of the value. The synced id and version are the same in every profile synced with
// that version, so a profile holds a handle to one shared copy of them (unique.Make): 16 bytes
// an entry instead of 40 (docs/audiences.md#memory). Its JSON is {"id","v","h"}.
type sent struct {
	K unique.Handle[syncKey]
	H hash
}

// syncKey is a synced definition: "a/<id>" or "t/<id>", and its version.
type syncKey struct{ ID, Version string }

func newSent(id, version string, h hash) sent {
	return sent{K: unique.Make(syncKey{id, version}), H: h}
}

func (e sent) id() string      { return e.K.Value().ID }
func (e sent) version() string { return e.K.Value().Version }

// sentJSON is the changelog form of a sent.
type sentJSON struct {
	ID      string `json:"id"` // "a/<id>" or "t/<id>"
	Version string `json:"v"`
	H       hash   `json:"h,omitempty"`
}

func (e sent) MarshalJSON() ([]byte, error) {
	return json.Marshal(sentJSON{ID: e.id(), Version: e.version(), H: e.H})
}

func (e *sent) UnmarshalJSON(b []byte) error {
	var j sentJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = newSent(j.ID, j.Version, j.H)
	return nil
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
	m.Each(func(k string, v json.RawMessage) { kvs = append(kvs, traitKV{in.str(k), in.val(parseVal(v))}) })
	slices.SortStableFunc(kvs, func(a, b traitKV) int { return strings.Compare(a.K, b.K) })
	for _, kv := range kvs {
		p.Traits.set(kv.K, kv.V)
	}
}

func (p *profile) eventSeries(name string, create bool) *counter {
	for i := range p.Events {
		if p.Events[i].Name.Value() == name {
			return &p.Events[i].counter
		}
	}
	if !create || len(p.Events) >= maxEventNames {
		return nil
	}
	p.Events = appendOne(p.Events, named{Name: unique.Make(name)})
	return &p.Events[len(p.Events)-1].counter
}

func (p *profile) agg(key sym, create bool) *agg {
	for i := range p.Aggs {
		if p.Aggs[i].Key == key {
			return &p.Aggs[i]
		}
	}
	if !create {
		return nil
	}
	p.Aggs = appendOne(p.Aggs, agg{Key: key})
	return &p.Aggs[len(p.Aggs)-1]
}

func (p *profile) synced(id string) *sent {
	for i := range p.Synced {
		if p.Synced[i].id() == id {
			return &p.Synced[i]
		}
	}
	return nil
}

func (p *profile) setSynced(id, version string, h hash, keep bool) {
	for i := range p.Synced {
		if p.Synced[i].id() == id {
			if keep {
				p.Synced[i] = newSent(id, version, h)
			} else {
				p.Synced = slices.Delete(p.Synced, i, i+1)
			}
			return
		}
	}
	if keep {
		p.Synced = appendOne(p.Synced, newSent(id, version, h))
	}
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
	for i := range o.Events {
		if s := p.eventSeries(o.Events[i].Name.Value(), true); s != nil {
			s.merge(&o.Events[i].counter, now)
		}
	}
	for i := range o.Aggs {
		oa := &o.Aggs[i]
		a := p.agg(oa.Key, true)
		if s := oa.ser(); s != nil {
			a.serRW().merge(s, now)
		}
		if ox := oa.fl(); ox != nil {
			if x := a.fl(); x == nil {
				a.st = &firstLast{First: ox.First, Last: ox.Last}
			} else {
				if ox.First.At < x.First.At {
					x.First = ox.First
				}
				if ox.Last.At > x.Last.At {
					x.Last = ox.Last
				}
			}
		}
		for _, f := range oa.freqs() {
			a.addFreq(f.V, f.N, f.First)
		}
		for _, v := range oa.uniques() {
			a.addUnique(v)
		}
	}
	if o.AnonymousID != "" && p.AnonymousID == "" && p.UserID == "" {
		p.AnonymousID = o.AnonymousID
	}
	for _, h := range o.Recent { // its messages' retries, handed on from now, stay duplicates
		p.repeated(h)
	}
	p.absorbTracks(o.tracks())
	p.absorbIdentity(o)
	p.addMerged(o.ID)
	for _, m := range o.Merged {
		p.addMerged(m)
	}
}

func (p *profile) addMerged(id string) {
	if id == "" || id == p.ID || slices.Contains(p.Merged, id) {
		return
	}
	if len(p.Merged) >= maxMerged {
		p.Merged = slices.Delete(p.Merged, 0, 1)
	}
	p.Merged = append(p.Merged, id)
}

func (a *agg) addFreq(v val, n uint32, at int64) {
	x, _ := a.st.(*freqList)
	if x == nil {
		x = &freqList{}
		a.st = x
	}
	for i := range *x {
		if f := &(*x)[i]; f.V.equal(v) {
			f.N += n
			if at < f.First {
				f.First = at
			}
			return
		}
	}
	if len(*x) < mostFrequentCap {
		*x = appendOne(*x, freq{V: v, N: n, First: at})
	}
}

func (a *agg) addUnique(v val) {
	x, _ := a.st.(*valList)
	if x == nil {
		x = &valList{}
		a.st = x
	}
	if len(*x) >= schemas.UniqueListCap {
		return
	}
	for _, have := range *x {
		if have.equal(v) {
			return
		}
	}
	*x = appendOne(*x, v)
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
