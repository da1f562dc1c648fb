package audiences

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"time"
	"unique"

	"github.com/tributary-cdp/tributary/schemas"
)

// model is the config compiled for evaluation: audiences, computed traits and the aggregates
// they read. It is immutable once built.
type model struct {
	audiences     []*audienceDef // by id
	traits        []*traitDef    // by id
	audiencesByID map[string]*audienceDef
	traitByID     map[string]*traitDef
	// aggs by event name: what each track event of that name feeds.
	aggsByEvent map[string][]*aggDef
	// aggKeys are the keys of every aggregate (agg.Key) of the config.
	aggKeys map[string]bool
	// aggs are the aggregates by what they count (aggFor).
	aggs map[string]*aggDef
	// in shares the strings apply keeps (nil: none shared).
	in       *interner
	realtime bool
}

// audienceDef is one audience, compiled. Its version changes whenever its name, source or
// rule does: a new version is synced as a new audience (docs/audiences.md#config-changes).
type audienceDef struct {
	// sid is the id in profile.Synced and the partition's metadata: "a/<id>".
	id, sid, name, key, source, version string
	realtime                            bool
	root                                *node
	// identifyOut and trackOut: what a membership change sends (docs/audiences.md#outputs).
	identifyOut, trackOut bool
	output                string
	// aggKeys are the aggregates its rule reads, through computed traits and audiences too:
	// it is ready once they are backfilled (docs/audiences.md#backfill).
	aggKeys []string
}

type traitDef struct {
	// sid is the id in profile.Synced and the partition's metadata: "t/<id>".
	id, sid, name, key, source, version string
	realtime                            bool
	kind                                string
	within                              int64 // ms
	// agg is what the trait reads; nil for a count without where, which reads the
	// profile's count of event.
	agg   *aggDef
	event string
	// emptyHash is valueHash(empty()): no value to keep.
	emptyHash hash
	// aggKeys: agg's key, if any (docs/audiences.md#backfill).
	aggKeys []string
}

// aggDef is one aggregate over a track event: its series (count, or a numeric property),
// first/last value, value frequencies or unique values, over the events matching where.
type aggDef struct {
	key   string
	sym   sym // key, shared: what profiles hold (agg.Key)
	event string
	where []whereDef
	path  []string // the property (nil: counts only)
	class string   // "series", "firstlast", "freq", "list"
}

type whereDef struct {
	path []string
	cmp  *comparison
}

// node is one compiled rule condition.
type node struct {
	op       string // all, any, not, event, trait, computedTrait
	children []*node
	// event
	event    string
	agg      *aggDef // where-filtered count; nil: the profile's plain count of event
	min, max uint64
	hasMax   bool
	within   int64 // ms; 0: ever
	// between: the window is [now-within, now-newer) when newer > 0 (ms)
	newer int64
	// audience
	aud *audienceDef // nil (unknown id): never matches
	// trait, computedTrait
	trait  string
	ctrait *traitDef
	cmp    *comparison
}

func version(parts ...any) string {
	b, _ := json.Marshal(parts)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// compile builds the model of a config snapshot's audiences and computed traits.
func compile(auds []*schemas.Audience, cts []*schemas.ComputedTrait) *model {
	m := &model{audiencesByID: map[string]*audienceDef{}, traitByID: map[string]*traitDef{}, aggsByEvent: map[string][]*aggDef{}, aggKeys: map[string]bool{}, aggs: map[string]*aggDef{}}
	for _, t := range cts {
		kind, body := t.Aggregate()
		if body == nil {
			continue
		}
		d := &traitDef{id: t.ID, sid: "t/" + t.ID, name: t.Name, key: t.TraitKey(), source: t.Source, realtime: t.Realtime, kind: kind,
			within: time.Duration(body.Within).Milliseconds(), version: version(t.Name, t.Source, kind, body)}
		var path []string
		if kind != schemas.AggCount {
			path = body.PropertyPath()
		}
		class := "series"
		switch kind {
		case schemas.AggFirst, schemas.AggLast:
			class = "firstlast"
		case schemas.AggMostFrequent:
			class = "freq"
		case schemas.AggUniqueList:
			class = "list"
		}
		if kind == schemas.AggCount && len(body.Where) == 0 {
			// A plain count is the profile's own count of the event (which also covers the
			// events from before the trait was configured).
			d.event = body.Event
		} else {
			d.agg = m.aggFor(body.Event, class, path, body.Where)
		}
		d.emptyHash = valueHash(d.empty())
		m.traits = append(m.traits, d)
		m.traitByID[t.ID] = d
		m.realtime = m.realtime || t.Realtime
	}
	// Every audience is known before the rules are compiled: an audience condition points at
	// the audience it names (docs/audiences.md#audiences-of-audiences).
	for _, a := range auds {
		d := &audienceDef{id: a.ID, sid: "a/" + a.ID, name: a.Name, key: a.TraitKey(), source: a.Source, realtime: a.Realtime,
			version: audienceVersion(a), output: a.Output}
		d.identifyOut, d.trackOut = a.Sends()
		m.audiences = append(m.audiences, d)
		m.audiencesByID[a.ID] = d
		m.realtime = m.realtime || a.Realtime
	}
	for i, a := range auds {
		m.audiences[i].root = m.compileNode(&a.Rule)
	}
	m.readAggs()
	sort.Slice(m.audiences, func(i, j int) bool { return m.audiences[i].id < m.audiences[j].id })
	sort.Slice(m.traits, func(i, j int) bool { return m.traits[i].id < m.traits[j].id })
	return m
}

// audienceVersion is the version of an audience: a hash of its name, source and rule, and of
// its output when that is not the default (so that the versions of the audiences from before
// outputs existed stay as they were).
func audienceVersion(a *schemas.Audience) string {
	if a.Output == "" || a.Output == schemas.OutputIdentify {
		return version(a.Name, a.Source, a.Rule)
	}
	return version(a.Name, a.Source, a.Rule, a.Output)
}

// aggFor is the aggregate of the model that counts this (made when it is new).
func (m *model) aggFor(event, class string, path []string, where []schemas.PropertyCondition) *aggDef {
	key := version(class, event, path, where)
	if a, ok := m.aggs[key]; ok {
		return a
	}
	a := &aggDef{key: class + ":" + key, event: event, path: path, class: class}
	a.sym = unique.Make(a.key)
	for i := range where {
		a.where = append(a.where, whereDef{path: where[i].PropertyPath(), cmp: compileComparison(&where[i].Comparison)})
	}
	m.aggs[key] = a
	m.aggKeys[a.key] = true
	m.aggsByEvent[event] = append(m.aggsByEvent[event], a)
	return a
}

// audienceByID is the audience of the config with this id; nil: none.
func (m *model) audienceByID(id string) *audienceDef { return m.audiencesByID[id] }

func (m *model) compileNode(c *schemas.Condition) *node {
	n := &node{}
	switch {
	case len(c.All) > 0 || len(c.Any) > 0:
		n.op = "all"
		list := c.All
		if len(c.Any) > 0 {
			n.op, list = "any", c.Any
		}
		for i := range list {
			n.children = append(n.children, m.compileNode(&list[i]))
		}
	case c.Not != nil:
		n.op = "not"
		n.children = []*node{m.compileNode(c.Not)}
	case c.Event != "":
		n.op, n.event = "event", c.Event
		n.min = uint64(c.MinCount())
		if c.AtMost != nil {
			n.hasMax, n.max = true, uint64(*c.AtMost)
		}
		n.within = time.Duration(c.Within).Milliseconds()
		if len(c.Between) == 2 {
			n.within, n.newer = time.Duration(c.Between[0]).Milliseconds(), time.Duration(c.Between[1]).Milliseconds()
		}
		if len(c.Where) > 0 {
			n.agg = m.aggFor(c.Event, "series", nil, c.Where)
		}
	case c.Trait != "":
		n.op, n.trait, n.cmp = "trait", c.Trait, compileComparison(&c.Comparison)
	case c.ComputedTrait != "":
		n.op, n.cmp = "computedTrait", compileComparison(&c.Comparison)
		n.ctrait = m.traitByID[c.ComputedTrait] // nil (unknown id): never matches
	case c.Audience != "":
		n.op = "audience"
		n.aud = m.audiencesByID[c.Audience] // nil (unknown id): never matches
	default:
		n.op = "never"
	}
	return n
}

// count is what an event condition counts in a series: the events of its window.
func (n *node) count(s seriesView, now int64) uint64 {
	if n.newer > 0 {
		return s.between(n.within, n.newer, now)
	}
	return s.total(n.within, now)
}

// eval evaluates a rule for a profile at now (ms).
func (n *node) eval(p *profile, now int64) bool {
	switch n.op {
	case "all":
		for _, c := range n.children {
			if !c.eval(p, now) {
				return false
			}
		}
		return true
	case "any":
		for _, c := range n.children {
			if c.eval(p, now) {
				return true
			}
		}
		return false
	case "not":
		return !n.children[0].eval(p, now)
	case "event":
		var count uint64
		if n.agg != nil {
			if a, ok := p.aggView(n.agg.sym); ok && a.hasSeries() {
				count = n.count(a.series(), now)
			}
		} else if c, ok := p.counterView(n.event); ok {
			count = n.count(c, now)
		}
		return count >= n.min && (!n.hasMax || count <= n.max)
	case "audience":
		// The other audience's membership at the same moment: its rule, evaluated for the
		// same profile (the config has no cycles, so this ends).
		return n.aud != nil && n.aud.root != nil && n.aud.root.eval(p, now)
	case "trait":
		return n.cmp.match(p.Traits.get(n.trait))
	case "computedTrait":
		if n.ctrait == nil {
			return false
		}
		return n.cmp.match(n.ctrait.value(p, now))
	}
	return false
}

// empty is the computed trait's value when no event counts.
func (d *traitDef) empty() val {
	switch d.kind {
	case schemas.AggCount, schemas.AggSum:
		return numVal(0)
	case schemas.AggUniqueList:
		return val{k: kRaw, s: "[]"}
	}
	return null
}

// value is the computed trait's current value for p at now (ms): its empty value (count and
// sum 0, uniqueList [], the others null) when no matching event counts.
func (d *traitDef) value(p *profile, now int64) val {
	if d.agg == nil { // a plain count
		var n uint64
		if s, ok := p.counterView(d.event); ok {
			n = s.total(d.within, now)
		}
		return numVal(float64(n))
	}
	a, ok := p.aggView(d.agg.sym)
	switch d.kind {
	case schemas.AggCount, schemas.AggSum:
		if !ok || !a.hasSeries() {
			return numVal(0)
		}
		n, b := a.window(d.within, now)
		if d.kind == schemas.AggCount {
			return numVal(float64(n))
		}
		return numVal(b.Sum)
	case schemas.AggAvg, schemas.AggMin, schemas.AggMax:
		if !ok || !a.hasSeries() {
			return null
		}
		_, b := a.window(d.within, now)
		if b.N == 0 {
			return null
		}
		switch d.kind {
		case schemas.AggAvg:
			return numVal(b.Sum / float64(b.N))
		case schemas.AggMin:
			return numVal(b.Min)
		default:
			return numVal(b.Max)
		}
	case schemas.AggFirst:
		if !ok {
			return null
		}
		first, _, _ := a.fl()
		return first.V
	case schemas.AggLast:
		if !ok {
			return null
		}
		_, last, _ := a.fl()
		return last.V
	case schemas.AggMostFrequent:
		if !ok {
			return null
		}
		var best freq
		seen := false
		a.eachFreq(func(f freq) {
			if !seen || f.N > best.N || (f.N == best.N && f.First < best.First) {
				best, seen = f, true
			}
		})
		return best.V // (null when none)
	case schemas.AggUniqueList:
		b := []byte{'['}
		if ok {
			first := true
			a.eachUnique(func(v val) {
				if !first {
					b = append(b, ',')
				}
				first = false
				b = v.appendJSON(b)
			})
		}
		// In the changelog's form (rawVal), so that it equals the value synced before a restart.
		return rawVal(append(b, ']'))
	}
	return null
}

// apply feeds one track event (at ms, its properties) to the profile's aggregates.
func (m *model) apply(p *profile, event string, props json.RawMessage, at, now int64) {
	m.applyParsed(p, event, props, nil, at, now)
}

// applyParsed is apply with the properties parsed already (schemas.ParseMembers of props,
// its error ignored) when pre is not nil.
func (m *model) applyParsed(p *profile, event string, props json.RawMessage, pre *schemas.Members, at, now int64) {
	defs := m.aggsByEvent[event]
	if len(defs) == 0 {
		return
	}
	var parsed schemas.Members
	parsedOK := false
	if pre != nil {
		parsed, parsedOK = *pre, true
	}
	get := func(path []string) val {
		if !parsedOK {
			parsedOK = true
			parsed, _ = schemas.ParseMembers(props) // not an object: no property matches
		}
		if len(path) == 0 {
			return null
		}
		raw, ok := parsed.Get(path[0])
		if !ok {
			return null
		}
		if len(path) == 1 {
			return m.in.parseVal(raw)
		}
		return m.in.val(lookup(raw, path[1:]))
	}
	for _, d := range defs {
		ok := true
		for _, w := range d.where {
			if !w.cmp.match(get(w.path)) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		var v val
		if d.path != nil {
			if v = get(d.path); v.isNull() {
				continue // an event without the property does not count for it
			}
			if d.class == "series" && v.k != kNumber {
				continue // sum, avg, min and max read numbers only (and leave no state)
			}
		}
		a := p.agg(d.sym, true)
		switch d.class {
		case "series":
			a.serRW().add(at, now, v.f, d.path != nil)
		case "firstlast":
			first, last, ok := a.fl()
			if !ok || at < first.At {
				first = stamped{V: v, At: at}
			}
			if !ok || at >= last.At {
				last = stamped{V: v, At: at}
			}
			a.setFL(first, last)
		case "freq":
			a.addFreq(v, 1, at)
		case "list":
			a.addUnique(v)
		}
	}
}
