package audiences

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

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

type named struct {
	Name string `json:"name"`
	series
}

// agg is the state of one aggregate of the config (aggDef), keyed by its definition, so that
// it survives config changes that keep it.
//
// Most aggregates are series (count, sum, avg, min, max), so the fields of the others are
// held apart (aggExtra, allocated when first written): 32 bytes a series aggregate instead of
// 88 (docs/audiences.md#memory). The JSON has the fields of both, flat.
type agg struct {
	Key string  `json:"key"`
	S   *series `json:"series,omitempty"` // count, sum, avg, min, max
	*aggExtra
}

// aggExtra holds the state of first, last, mostFrequent and uniqueList aggregates.
type aggExtra struct {
	First *stamped `json:"first,omitempty"`
	Last  *stamped `json:"last,omitempty"`
	Freq  []freq   `json:"freq,omitempty"`
	List  []val    `json:"list,omitempty"`
}

// UnmarshalJSON reads the flat JSON of an aggregate (encoding/json cannot allocate an
// embedded pointer to an unexported struct).
func (a *agg) UnmarshalJSON(b []byte) error {
	var flat struct {
		Key string  `json:"key"`
		S   *series `json:"series"`
		aggExtra
	}
	if err := json.Unmarshal(b, &flat); err != nil {
		return err
	}
	a.Key, a.S, a.aggExtra = flat.Key, flat.S, nil
	if x := flat.aggExtra; x.First != nil || x.Last != nil || len(x.Freq) > 0 || len(x.List) > 0 {
		a.aggExtra = &x
	}
	return nil
}

// noExtra is what ro returns for an aggregate with no aggExtra; it is never written.
var noExtra aggExtra

// ro returns the aggregate's aggExtra for reading (an empty one when it has none).
func (a *agg) ro() *aggExtra {
	if a.aggExtra == nil {
		return &noExtra
	}
	return a.aggExtra
}

// rw returns the aggregate's aggExtra for writing, allocating it.
func (a *agg) rw() *aggExtra {
	if a.aggExtra == nil {
		a.aggExtra = &aggExtra{}
	}
	return a.aggExtra
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
// instead of the value.
type sent struct {
	ID      string `json:"id"` // "a/<id>" or "t/<id>"
	Version string `json:"v"`
	H       hash   `json:"h,omitempty"`
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

func (p *profile) eventSeries(name string, create bool) *series {
	for i := range p.Events {
		if p.Events[i].Name == name {
			return &p.Events[i].series
		}
	}
	if !create || len(p.Events) >= maxEventNames {
		return nil
	}
	p.Events = appendOne(p.Events, named{Name: name})
	return &p.Events[len(p.Events)-1].series
}

func (p *profile) agg(key string, create bool) *agg {
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
		if p.Synced[i].ID == id {
			return &p.Synced[i]
		}
	}
	return nil
}

func (p *profile) setSynced(id, version string, h hash, keep bool) {
	for i := range p.Synced {
		if p.Synced[i].ID == id {
			if keep {
				p.Synced[i] = sent{ID: id, Version: version, H: h}
			} else {
				p.Synced = slices.Delete(p.Synced, i, i+1)
			}
			return
		}
	}
	if keep {
		p.Synced = appendOne(p.Synced, sent{ID: id, Version: version, H: h})
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
		if s := p.eventSeries(o.Events[i].Name, true); s != nil {
			s.merge(&o.Events[i].series, now)
		}
	}
	for i := range o.Aggs {
		oa := &o.Aggs[i]
		a := p.agg(oa.Key, true)
		if oa.S != nil {
			if a.S == nil {
				a.S = &series{}
			}
			a.S.merge(oa.S, now)
		}
		ox := oa.ro()
		if ox.First != nil && (a.ro().First == nil || ox.First.At < a.First.At) {
			a.rw().First = ox.First
		}
		if ox.Last != nil && (a.ro().Last == nil || ox.Last.At > a.Last.At) {
			a.rw().Last = ox.Last
		}
		for _, f := range ox.Freq {
			a.addFreq(f.V, f.N, f.First)
		}
		for _, v := range ox.List {
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
	x := a.rw()
	for i := range x.Freq {
		if x.Freq[i].V.equal(v) {
			x.Freq[i].N += n
			if at < x.Freq[i].First {
				x.Freq[i].First = at
			}
			return
		}
	}
	if len(x.Freq) < mostFrequentCap {
		x.Freq = appendOne(x.Freq, freq{V: v, N: n, First: at})
	}
}

func (a *agg) addUnique(v val) {
	x := a.rw()
	if len(x.List) >= schemas.UniqueListCap {
		return
	}
	for _, have := range x.List {
		if have.equal(v) {
			return
		}
	}
	x.List = appendOne(x.List, v)
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
