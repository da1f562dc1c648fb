package schemas

import (
	"cmp"
	"slices"

	"github.com/tributary-cdp/tributary/schemas/fql"
)

// Destination filters at work (docs/routing.md#destination-filters): CompileFilters turns a
// destination's filters into CompiledFilters once per config snapshot; Decide runs them on one
// message without allocating. The router and the console's test-a-message endpoint share it.

// MaxFilters is the most filters one destination may have.
const MaxFilters = 64

// CompiledFilters are a destination's filters, compiled and sorted in the order they apply:
// sample, drop, dropProperties, allowProperties (list order within an action). Immutable: safe
// for concurrent use.
type CompiledFilters struct {
	filters []compiledFilter
}

type compiledFilter struct {
	*DestinationFilter
	cond *fql.Expr // nil: every message (or, with bad set, none can be decided)
	// bad marks a condition or a path that does not compile (a config written before a
	// validation rule, or bypassing it): the filter then drops every message it applies to,
	// as Segment does, rather than let through what it should have removed.
	bad bool
	// keepBelow is, for sample, the kept share of the hash space: keep when
	// sampleHash(messageId, name) % sampleScale < keepBelow.
	keepBelow uint64
	paths     *fql.PathSet
}

const sampleScale = 1_000_000

var actionOrder = map[string]int{FilterSample: 0, FilterDrop: 1, FilterDropProperties: 2, FilterAllowProperties: 3}

// CompileFilters compiles d's filters; nil when it has none (the router's fast path).
func CompileFilters(d *Destination) *CompiledFilters {
	if len(d.Filters) == 0 {
		return nil
	}
	c := &CompiledFilters{}
	for i := range d.Filters {
		f := &d.Filters[i]
		cf := compiledFilter{DestinationFilter: f}
		if _, ok := actionOrder[f.Action]; !ok {
			continue // validation refuses it; an unknown action does nothing
		}
		if f.If != "" {
			e, err := fql.Compile(f.If)
			cf.cond, cf.bad = e, err != nil
		}
		switch f.Action {
		case FilterSample:
			p := 0.0
			if f.Percent != nil {
				p = min(max(*f.Percent, 0), 100)
			}
			cf.keepBelow = uint64(p * sampleScale / 100)
		case FilterDropProperties, FilterAllowProperties:
			ps, err := fql.NewPathSet(f.Properties)
			cf.paths, cf.bad = ps, cf.bad || err != nil
		}
		c.filters = append(c.filters, cf)
		if len(c.filters) == MaxFilters {
			break
		}
	}
	slices.SortStableFunc(c.filters, func(a, b compiledFilter) int {
		return cmp.Compare(actionOrder[a.Action], actionOrder[b.Action])
	})
	return c
}

// FilterDecision is what a destination's filters decided for one message.
type FilterDecision struct {
	// DroppedBy is the index (Name) of the filter that sampled the message out or dropped it,
	// or -1: it is delivered.
	DroppedBy int
	// Rewrites has bit i set for each property filter i that matched: the delivered body is
	// AppendRewritten's.
	Rewrites uint64
}

// Dropped reports whether a filter dropped the message.
func (fd FilterDecision) Dropped() bool { return fd.DroppedBy >= 0 }

// Name returns the name of filter i (in the order of application).
func (c *CompiledFilters) Name(i int) string { return c.filters[i].Name }

// Len is how many filters there are.
func (c *CompiledFilters) Len() int { return len(c.filters) }

// FilterStep is one filter's part in a decision, for explaining it (the console's
// test-a-message box).
type FilterStep struct {
	Filter  string `json:"filter"`
	Action  string `json:"action"`
	Matched bool   `json:"matched"`
	// Result is "kept" (sampled in), "sampledOut", "dropped", "propertiesDropped",
	// "propertiesAllowed", or "skipped" (the condition did not match, or an earlier filter
	// dropped the message).
	Result string `json:"result"`
}

// Decide runs the filters that apply to the source's messages on one message (m holds its
// JSON; messageID seeds the sampling) in their fixed order; sourceID "" applies every filter.
// It does not allocate. With steps not nil, it appends one FilterStep per filter that applies.
func (c *CompiledFilters) Decide(sourceID, messageID string, m *fql.Message, steps *[]FilterStep) FilterDecision {
	fd := FilterDecision{DroppedBy: -1}
	for i := range c.filters {
		f := &c.filters[i]
		if sourceID != "" && !f.AppliesTo(sourceID) {
			continue
		}
		matched := f.bad || f.cond == nil || f.cond.Eval(m)
		result := "skipped"
		switch {
		case fd.Dropped():
		case !matched:
		case f.bad:
			fd.DroppedBy, result = i, "dropped"
		case f.Action == FilterSample:
			if sampleHash(messageID, f.Name)%sampleScale < f.keepBelow {
				result = "kept"
			} else {
				fd.DroppedBy, result = i, "sampledOut"
			}
		case f.Action == FilterDrop:
			fd.DroppedBy, result = i, "dropped"
		case f.Action == FilterDropProperties:
			fd.Rewrites |= 1 << i
			result = "propertiesDropped"
		case f.Action == FilterAllowProperties:
			fd.Rewrites |= 1 << i
			result = "propertiesAllowed"
		}
		if steps != nil {
			*steps = append(*steps, FilterStep{Filter: f.Name, Action: f.Action, Matched: matched, Result: result})
		}
		if fd.Dropped() && steps == nil {
			return fd
		}
	}
	return fd
}

// AppendRewritten appends to dst the JSON object obj (a delivered body) as the property
// filters of fd leave it: each dropProperties filter removes its paths, then each
// allowProperties one keeps, of properties, traits and context, only its paths (the other
// fields pass).
func (c *CompiledFilters) AppendRewritten(dst, obj []byte, fd FilterDecision) []byte {
	var m fql.Message
	m.Reset(obj)
	return c.AppendRewrittenFrom(dst, &m, fd)
}

// AppendRewrittenFrom is AppendRewritten of the object m holds — the one Decide read — reusing
// what m indexed of it.
func (c *CompiledFilters) AppendRewrittenFrom(dst []byte, m *fql.Message, fd FilterDecision) []byte {
	start := len(dst)
	var obj []byte // the previous rewrite's output
	for i := range c.filters {
		if fd.Rewrites&(1<<i) == 0 {
			continue
		}
		f := &c.filters[i]
		switch {
		case obj == nil && len(dst) == start && f.Action == FilterDropProperties:
			dst = f.paths.AppendDroppedFrom(dst, m)
		case obj == nil && len(dst) == start:
			dst = f.paths.AppendKeptFrom(dst, m)
		default:
			obj = append(obj[:0], dst[start:]...) // a second rewrite reads the first's output
			dst = dst[:start]
			if f.Action == FilterDropProperties {
				dst = f.paths.AppendDropped(dst, obj)
			} else {
				dst = f.paths.AppendKept(dst, obj)
			}
		}
	}
	return dst
}

// sampleHash is FNV-1a (64 bits, mixed) of messageID, a zero byte and the filter's name: the same
// message meets the same fate on a retry or a replay, and two sample filters decide apart.
func sampleHash(messageID, name string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(messageID); i++ {
		h = (h ^ uint64(messageID[i])) * prime
	}
	h *= prime // the zero byte
	for i := 0; i < len(name); i++ {
		h = (h ^ uint64(name[i])) * prime
	}
	// A final mix (MurmurHash3's) spreads FNV's weak low bits before the modulo.
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}
