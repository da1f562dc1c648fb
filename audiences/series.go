package audiences

import (
	"cmp"
	"math"
	"slices"
)

// Buckets (docs/audiences.md#time-buckets). A series counts events (and sums a property) in
// buckets keyed by the minute they start at (minutes since the Unix epoch). Buckets of the
// last 24 hours are one minute wide; older ones are merged into one bucket per hour (keyed by
// the hour's first minute); buckets older than 90 days are dropped from the series (a series
// also keeps the total of every event it ever counted, for rules without a window).
//
// A window of length W evaluated at t counts the buckets whose key is at or after the minute
// of t-W. An event is therefore counted if its bucket starts inside the window: a window that
// ends less than 24 hours back errs by less than a minute, a longer one by less than an hour
// (events in the hour the window's start falls in are counted only from that hour's
// beginning, so up to 59 minutes of the window's oldest events may be missed).
const (
	minuteMs     = 60_000
	fineSpanMins = 24 * 60      // minute buckets for this long
	keepMins     = 90 * 24 * 60 // buckets older than this are dropped
)

// count is one time bucket of an event counter: n events in the minute (or hour) starting at
// At. 8 bytes: an event counter has no property to sum (docs/audiences.md#memory).
type count struct {
	At int32  `json:"t"` // minutes since the Unix epoch
	N  uint32 `json:"n"`
}

// bucket is one time bucket of an aggregate's series: n events; sum, min and max of their
// property (numeric series only).
type bucket struct {
	At  int32   `json:"t"` // minutes since the Unix epoch
	N   uint32  `json:"n"`
	Sum float64 `json:"s,omitempty"`
	Min float64 `json:"lo,omitempty"`
	Max float64 `json:"hi,omitempty"`
}

// slot is what a seriesOf is made of: a count or a bucket.
type slot[B any] interface {
	count | bucket
	minute() int32
	moved(minute int32) B           // the same events in the bucket starting at minute
	plus(o B) B                     // both buckets' events
	plusOne(x float64, hasX bool) B // one more event, of value x when hasX
	events() uint32
	appendStats(b []byte) []byte // its JSON fields after "t" and "n"
}

func (c count) minute() int32               { return c.At }
func (c count) moved(m int32) count         { c.At = m; return c }
func (c count) plus(o count) count          { c.N += o.N; return c }
func (c count) plusOne(float64, bool) count { c.N++; return c }
func (c count) events() uint32              { return c.N }
func (c count) appendStats(b []byte) []byte { return b }
func (b bucket) minute() int32              { return b.At }
func (b bucket) moved(m int32) bucket       { b.At = m; return b }
func (b bucket) plus(o bucket) bucket       { mergeBucket(&b, o); return b }
func (b bucket) events() uint32             { return b.N }
func (b bucket) plusOne(x float64, hasX bool) bucket {
	if hasX {
		if b.N == 0 || x < b.Min {
			b.Min = x
		}
		if b.N == 0 || x > b.Max {
			b.Max = x
		}
		b.Sum += x
	}
	b.N++
	return b
}

// seriesOf is a bucketed history: ascending by minute.
type seriesOf[B slot[B]] struct {
	Total   uint64 `json:"total"`
	Buckets []B    `json:"b,omitempty"`
}

type (
	// series is an aggregate's history (count, sum, avg, min, max).
	series = seriesOf[bucket]
	// counter is the history of one track event name.
	counter = seriesOf[count]
)

func minuteOf(ms int64) int32 { return int32(ms / minuteMs) }

// byMinute orders buckets by their minute (for binary searches; a subtraction would overflow
// for a window reaching back to the minimum).
func byMinute[B slot[B]](b B, t int32) int { return cmp.Compare(b.minute(), t) }

// add counts one event at ms (with numeric value x when hasX) and compacts the series as of
// now (ms): older minutes merge into hours, and what is older than 90 days is dropped.
func (s *seriesOf[B]) add(ms, now int64, x float64, hasX bool) {
	s.Total++
	m := minuteOf(ms)
	nowMin := minuteOf(now)
	if m < nowMin-keepMins {
		return
	}
	if m < nowMin-fineSpanMins {
		m -= m % 60
	}
	i, found := slices.BinarySearchFunc(s.Buckets, m, byMinute[B])
	if !found {
		var zero B
		s.Buckets = insertOne(s.Buckets, i, zero.moved(m))
	}
	s.Buckets[i] = s.Buckets[i].plusOne(x, hasX)
	if len(s.Buckets) > 1 && s.Buckets[0].minute() < nowMin-fineSpanMins {
		s.compact(nowMin)
	}
}

// compact merges minute buckets older than 24 hours into hour buckets and drops buckets
// older than 90 days.
func (s *seriesOf[B]) compact(nowMin int32) {
	out := s.Buckets[:0]
	for _, b := range s.Buckets {
		at := b.minute()
		if at < nowMin-keepMins {
			continue
		}
		if at < nowMin-fineSpanMins {
			b = b.moved(at - at%60)
		}
		if n := len(out); n > 0 && out[n-1].minute() == b.minute() {
			out[n-1] = out[n-1].plus(b)
			continue
		}
		out = append(out, b)
	}
	s.Buckets = out
}

func mergeBucket(into *bucket, b bucket) {
	if b.N == 0 {
		return
	}
	if into.N == 0 || b.Min < into.Min {
		into.Min = b.Min
	}
	if into.N == 0 || b.Max > into.Max {
		into.Max = b.Max
	}
	into.N += b.N
	into.Sum += b.Sum
}

// windowOf sums the buckets of an aggregate's series in the last withinMs before now (ms);
// withinMs 0: every event ever (the count is Total; sum, min and max cover the 90 days kept).
func windowOf(s *series, withinMs, now int64) (n uint64, agg bucket) {
	from := int32(math.MinInt32)
	if withinMs > 0 {
		from = minuteOf(now - withinMs)
	}
	i, _ := slices.BinarySearchFunc(s.Buckets, from, func(b bucket, t int32) int { return cmp.Compare(b.At, t) })
	for _, b := range s.Buckets[i:] {
		n += uint64(b.N)
		mergeBucket(&agg, b)
	}
	if withinMs == 0 {
		n = s.Total
	}
	return n, agg
}

// total counts the events in the last withinMs before now (ms); withinMs 0: every event ever.
func (s *seriesOf[B]) total(withinMs, now int64) uint64 {
	if withinMs == 0 {
		return s.Total
	}
	return countIn(s.Buckets, minuteOf(now-withinMs), math.MaxInt32)
}

// between counts the events of the buckets between olderMs and newerMs before now (ms): the
// buckets whose key is at or after the minute of now-olderMs and before the minute of
// now-newerMs (docs/audiences.md#between-windows).
func (s *seriesOf[B]) between(olderMs, newerMs, now int64) uint64 {
	return countIn(s.Buckets, minuteOf(now-olderMs), minuteOf(now-newerMs))
}

// countIn counts the events of the buckets of the minutes [from, to). Its loops are written
// for each kind of bucket: rules read them for every profile at every sync, and a loop over
// a type parameter's methods is several times slower (BenchmarkEventWindow).
func countIn[B slot[B]](buckets []B, from, to int32) (n uint64) {
	switch bs := any(buckets).(type) {
	case []count:
		i, _ := slices.BinarySearchFunc(bs, from, func(c count, t int32) int { return cmp.Compare(c.At, t) })
		for _, c := range bs[i:] {
			if c.At >= to {
				break
			}
			n += uint64(c.N)
		}
	case []bucket:
		i, _ := slices.BinarySearchFunc(bs, from, func(b bucket, t int32) int { return cmp.Compare(b.At, t) })
		for _, b := range bs[i:] {
			if b.At >= to {
				break
			}
			n += uint64(b.N)
		}
	}
	return n
}

// merge adds another series (a merged profile's) into s.
func (s *seriesOf[B]) merge(o *seriesOf[B], now int64) {
	s.Total += o.Total
	for _, b := range o.Buckets {
		i, found := slices.BinarySearchFunc(s.Buckets, b.minute(), byMinute[B])
		if !found {
			var zero B
			s.Buckets = insertOne(s.Buckets, i, zero.moved(b.minute()))
		}
		s.Buckets[i] = s.Buckets[i].plus(b)
	}
	s.compact(minuteOf(now))
}
