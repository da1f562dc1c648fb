package audiences

import (
	"cmp"
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

// bucket is one time bucket of a series: n events; sum, min and max of their property
// (numeric series only).
type bucket struct {
	At  int32   `json:"t"` // minutes since the Unix epoch
	N   uint32  `json:"n"`
	Sum float64 `json:"s,omitempty"`
	Min float64 `json:"lo,omitempty"`
	Max float64 `json:"hi,omitempty"`
}

// series is a bucketed history: ascending by At.
type series struct {
	Total   uint64   `json:"total"`
	Buckets []bucket `json:"b,omitempty"`
}

func minuteOf(ms int64) int32 { return int32(ms / minuteMs) }

// byMinute orders buckets by their minute (for binary searches; a subtraction would overflow
// for a window reaching back to the minimum).
func byMinute(b bucket, t int32) int { return cmp.Compare(b.At, t) }

// add counts one event at ms (with numeric value x when hasX) and compacts the series as of
// now (ms): older minutes merge into hours, and what is older than 90 days is dropped.
func (s *series) add(ms, now int64, x float64, hasX bool) {
	s.Total++
	m := minuteOf(ms)
	nowMin := minuteOf(now)
	if m < nowMin-keepMins {
		return
	}
	if m < nowMin-fineSpanMins {
		m -= m % 60
	}
	i, found := slices.BinarySearchFunc(s.Buckets, m, byMinute)
	if !found {
		s.Buckets = insertOne(s.Buckets, i, bucket{At: m})
	}
	b := &s.Buckets[i]
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
	if len(s.Buckets) > 1 && s.Buckets[0].At < nowMin-fineSpanMins {
		s.compact(nowMin)
	}
}

// compact merges minute buckets older than 24 hours into hour buckets and drops buckets
// older than 90 days.
func (s *series) compact(nowMin int32) {
	out := s.Buckets[:0]
	for _, b := range s.Buckets {
		if b.At < nowMin-keepMins {
			continue
		}
		if b.At < nowMin-fineSpanMins {
			b.At -= b.At % 60
		}
		if n := len(out); n > 0 && out[n-1].At == b.At {
			mergeBucket(&out[n-1], b)
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

// window sums the buckets in the last withinMs before now (ms); withinMs 0: every event ever
// (the count is Total; sum, min and max cover the 90 days kept).
func (s *series) window(withinMs, now int64) (n uint64, agg bucket) {
	from := int32(-1 << 31)
	if withinMs > 0 {
		from = minuteOf(now - withinMs)
	}
	i, _ := slices.BinarySearchFunc(s.Buckets, from, byMinute)
	for _, b := range s.Buckets[i:] {
		n += uint64(b.N)
		mergeBucket(&agg, b)
	}
	if withinMs == 0 {
		n = s.Total
	}
	return n, agg
}

// between counts the events of the buckets between olderMs and newerMs before now (ms): the
// buckets whose key is at or after the minute of now-olderMs and before the minute of
// now-newerMs (docs/audiences.md#between-windows).
func (s *series) between(olderMs, newerMs, now int64) (n uint64) {
	from, to := minuteOf(now-olderMs), minuteOf(now-newerMs)
	i, _ := slices.BinarySearchFunc(s.Buckets, from, byMinute)
	for _, b := range s.Buckets[i:] {
		if b.At >= to {
			break
		}
		n += uint64(b.N)
	}
	return n
}

// merge adds another series (a merged profile's) into s.
func (s *series) merge(o *series, now int64) {
	s.Total += o.Total
	for _, b := range o.Buckets {
		i, found := slices.BinarySearchFunc(s.Buckets, b.At, byMinute)
		if !found {
			s.Buckets = insertOne(s.Buckets, i, bucket{At: b.At})
		}
		mergeBucket(&s.Buckets[i], b)
	}
	s.compact(minuteOf(now))
}
