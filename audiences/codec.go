package audiences

import (
	"math"
	"strconv"

	"github.com/tributary-cdp/tributary/schemas"
)

// The changelog encoder. A profile is written to audiences.state every time a batch touches
// it, so its JSON is appended by hand, as encoding/json would write it from the struct tags
// (the field names of docs/topics.md#audiencesstate), without reflection; json.Unmarshal
// reads it back (restore is rarer). TestProfileJSONMatchesEncodingJSON keeps the two equal.

// MarshalJSON is appendJSON, for json.Marshal (the profile inside an audiences.repartition
// record).
func (p *profile) MarshalJSON() ([]byte, error) { return p.appendJSON(nil), nil }

// changelogValue appends the profile's audiences.state value to b: appendJSON for a profile;
// for a merge redirect only the profile it leads to, {"mergedInto":<id>}, and for a suppression
// marker only {"suppressed":true}. The key is the id; nothing else of the user is kept in them
// (docs/topics.md#audiencesstate).
func (p *profile) changelogValue(b []byte) []byte {
	switch {
	case p.mergedInto() != "":
		b = append(b, `{"mergedInto":`...)
		b = schemas.AppendJSONString(b, p.mergedInto())
		return append(b, '}')
	case p.Suppressed:
		return append(b, `{"suppressed":true}`...)
	}
	return p.appendJSON(b)
}

// appendJSON appends the profile's changelog JSON to b.
func (p *profile) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = schemas.AppendJSONString(b, p.ID)
	b = appendStringField(b, "userId", p.userID())
	b = appendStringField(b, "anonymousId", p.anonymousID())
	if len(p.Traits) > 0 {
		b = append(b, `,"traits":`...)
		b = p.Traits.appendJSON(b)
	}
	b = appendIntField(b, "firstSeen", p.FirstSeen)
	b = appendIntField(b, "lastSeen", p.LastSeen)
	events, aggs := p.unpacked()
	if len(events) > 0 {
		b = append(b, `,"events":[`...)
		for i := range events {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = schemas.AppendJSONString(b, events[i].Name.Value())
			b = events[i].counter.appendFields(append(b, ','))
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(aggs) > 0 {
		b = append(b, `,"aggs":[`...)
		for i := range aggs {
			if i > 0 {
				b = append(b, ',')
			}
			b = aggs[i].appendJSON(b)
		}
		b = append(b, ']')
	}
	if len(p.Synced) > 0 {
		b = append(b, `,"synced":[`...)
		first := true
		for s := range p.Synced.all() {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, `{"id":`...)
			k := syncKeyOf(s.K)
			b = schemas.AppendJSONString(b, k.ID)
			b = append(b, `,"v":`...)
			b = schemas.AppendJSONString(b, k.Version)
			if s.H != 0 {
				b = append(b, `,"h":`...)
				b = s.H.appendJSON(b)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if merged := p.merged(); len(merged) > 0 {
		b = append(b, `,"merged":[`...)
		for i, m := range merged {
			if i > 0 {
				b = append(b, ',')
			}
			b = schemas.AppendJSONString(b, m)
		}
		b = append(b, ']')
	}
	if ts := p.tracks(); len(ts) > 0 {
		b = append(b, `,"tracks":[`...)
		for i := range ts {
			if i > 0 {
				b = append(b, ',')
			}
			b = ts[i].appendJSON(b)
		}
		b = append(b, ']')
	}
	if p.Identity != nil {
		b = p.Identity.appendJSON(append(b, `,"identity":`...))
	}
	b = appendStringField(b, "mergedInto", p.mergedInto())
	if p.Suppressed {
		b = append(b, `,"suppressed":true`...)
	}
	b = append(b, `,"recent":[`...)
	for i, h := range p.Recent {
		if i > 0 {
			b = append(b, ',')
		}
		b = h.appendJSON(b)
	}
	b = append(b, ']')
	b = appendIntField(b, "recentNext", int64(p.RecentNext))
	return append(b, '}')
}

func (a *agg) appendJSON(b []byte) []byte {
	b = append(b, `{"key":`...)
	b = schemas.AppendJSONString(b, a.Key.Value())
	switch x := a.st.(type) {
	case *series:
		b = append(b, `,"series":{`...)
		b = append(x.appendFields(b), '}')
	}
	if first, last, ok := a.fl(); ok {
		b = first.appendField(b, "first")
		b = last.appendField(b, "last")
	}
	if fs := a.freqs(); len(fs) > 0 {
		b = append(b, `,"freq":[`...)
		for i, f := range fs {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"v":`...)
			b = f.V.appendJSON(b)
			b = append(b, `,"n":`...)
			b = strconv.AppendUint(b, uint64(f.N), 10)
			b = append(b, `,"at":`...)
			b = strconv.AppendInt(b, f.First, 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if vs := a.uniques(); len(vs) > 0 {
		b = append(b, `,"list":[`...)
		for i, v := range vs {
			if i > 0 {
				b = append(b, ',')
			}
			b = v.appendJSON(b)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendField appends ,"name":{"v":…,"at":…}.
func (st *stamped) appendField(b []byte, name string) []byte {
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":{"v":`...)
	b = st.V.appendJSON(b)
	b = append(b, `,"at":`...)
	b = strconv.AppendInt(b, st.At, 10)
	return append(b, '}')
}

// appendFields appends the series' fields (without braces): "total" and the buckets "b".
func (s *seriesOf[B]) appendFields(b []byte) []byte {
	b = append(b, `"total":`...)
	b = strconv.AppendUint(b, s.Total, 10)
	if len(s.Buckets) == 0 {
		return b
	}
	b = append(b, `,"b":[`...)
	for i, k := range s.Buckets {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"t":`...)
		b = strconv.AppendInt(b, int64(k.minute()), 10)
		b = append(b, `,"n":`...)
		b = strconv.AppendUint(b, uint64(k.events()), 10)
		b = k.appendStats(b)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendStats appends the bucket's sum, min and max.
func (k bucket) appendStats(b []byte) []byte {
	b = appendFloatField(b, "s", k.Sum)
	b = appendFloatField(b, "lo", k.Min)
	return appendFloatField(b, "hi", k.Max)
}

func appendStringField(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	return schemas.AppendJSONString(b, v)
}

func appendIntField(b []byte, name string, v int64) []byte {
	if v == 0 {
		return b
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	return strconv.AppendInt(b, v, 10)
}

// appendFloatField appends a non-zero, finite float field (omitempty; a sum that overflowed
// to ±Inf is written as the largest float of its sign, as JSON has no infinity).
func appendFloatField(b []byte, name string, v float64) []byte {
	if v == 0 || math.IsNaN(v) {
		return b
	}
	if math.IsInf(v, 0) {
		v = math.Copysign(math.MaxFloat64, v)
	}
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":`...)
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

func (t *tracked) appendJSON(b []byte) []byte {
	b = append(b, `{"t":`...)
	b = strconv.AppendInt(b, t.At, 10)
	b = append(b, `,"e":`...)
	b = schemas.AppendJSONString(b, t.Event)
	b = appendStringField(b, "m", t.MessageID)
	b = appendStringField(b, "s", t.Source)
	if t.Props != "" {
		b = append(b, `,"p":`...)
		b = append(b, t.Props...)
	}
	return append(b, '}')
}
