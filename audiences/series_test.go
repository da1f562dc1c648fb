package audiences

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// point is one event of a series test: at (ms before testNow) with value x, processed at
// (ms before testNow; the event's own time when live).
type point struct {
	ago, processedAgo int64
	x                 float64
}

func live(ago int64, x float64) point { return point{ago: ago, processedAgo: ago, x: x} }
func late(ago int64, x float64) point { return point{ago: ago, x: x} } // processed at testNow

func build(hasX bool, pts ...point) *series {
	s := &series{}
	for _, p := range pts {
		s.add(testNow-p.ago, testNow-p.processedAgo, p.x, hasX)
	}
	return s
}

// layout writes the buckets as "minutes before testNow:count", oldest first.
func layout(s *series) string {
	now := minuteOf(testNow)
	var out []string
	for _, b := range s.Buckets {
		out = append(out, fmt.Sprintf("%d:%d", now-b.At, b.N))
	}
	return strings.Join(out, " ")
}

func TestSeriesBuckets(t *testing.T) {
	// testNow is 12:30, so the hour of an event 25 hours back (11:30) starts 1530 minutes back.
	tests := []struct {
		name      string
		pts       []point
		want      string
		wantTotal uint64
	}{
		{"one minute bucket", []point{live(5*minute, 0)}, "5:1", 1},
		{"same minute adds up", []point{live(minute, 0), live(minute-30_000, 0), live(minute-59_999, 0)}, "1:3", 3},
		{"minute buckets for 24 hours", []point{live(day, 0), live(23*hour, 0), live(minute, 0), live(0, 0)}, "1440:1 1380:1 1:1 0:1", 4},
		{"out of order events are sorted", []point{late(minute, 0), late(3*minute, 0), late(2*minute, 0)}, "3:1 2:1 1:1", 3},
		{"older than 24 hours: an hour bucket", []point{live(day+minute, 0), live(0, 0)}, "1470:1 0:1", 2},
		{"a late event older than 24 hours goes to its hour", []point{late(25*hour, 0)}, "1530:1", 1},
		{"one hour bucket per hour", []point{live(25*hour, 0), live(25*hour+29*minute, 0), live(25*hour-29*minute, 0), live(24*hour+29*minute, 0), live(0, 0)},
			"1530:3 1470:1 0:1", 5},
		{"minute and late hour events of one hour merge", []point{live(30*hour+10*minute, 0), live(30*hour, 0), late(30*hour+20*minute, 0)}, "1830:3", 3},
		{"a single old minute bucket stays until the next event", []point{live(3*day, 0)}, fmt.Sprint(3*day/minute, ":1"), 1},
		{"kept for 90 days (in the hour of its start)", []point{live(90*day, 0), live(0, 0)}, "129630:1 0:1", 2},
		{"a late event older than 90 days counts in Total only", []point{late(90*day+minute, 0), late(0, 0)}, "0:1", 2},
		{"dropped after 90 days", []point{live(90*day+hour, 0), live(45*day, 0), live(0, 0)}, "64830:1 0:1", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := build(false, tt.pts...)
			if got := layout(s); got != tt.want {
				t.Errorf("buckets = %q, want %q", got, tt.want)
			}
			if s.Total != tt.wantTotal {
				t.Errorf("Total = %d, want %d", s.Total, tt.wantTotal)
			}
		})
	}
}

func TestSeriesWindow(t *testing.T) {
	// Values 1..5 at 1 minute, 2 hours, 2 days, 30 days and 100 days back (the last one
	// counted in Total only), each processed when it happened.
	s := build(true, live(100*day, 5), live(30*day, 4), live(2*day, 3), live(2*hour, 2), live(minute, 1))
	tests := []struct {
		within             int64
		n                  uint64
		sum, lo, hi, count float64
	}{
		{within: 0, n: 5, sum: 10, lo: 1, hi: 4, count: 4},
		{within: minute, n: 1, sum: 1, lo: 1, hi: 1, count: 1},
		{within: minute - 1, n: 1, sum: 1, lo: 1, hi: 1, count: 1}, // the minute of the start counts whole
		{within: 2 * hour, n: 2, sum: 3, lo: 1, hi: 2, count: 2},
		{within: 2*hour - minute, n: 1, sum: 1, lo: 1, hi: 1, count: 1},
		{within: 3 * day, n: 3, sum: 6, lo: 1, hi: 3, count: 3},
		{within: 90 * day, n: 4, sum: 10, lo: 1, hi: 4, count: 4},
		// The event of 30 days back (at 12:30) is in the hour bucket 12:00, before the start
		// of a 30 day window: missed, as the error bound of windows over 24 hours allows.
		{within: 30 * day, n: 3, sum: 6, lo: 1, hi: 3, count: 3},
		{within: 30*day + 30*minute, n: 4, sum: 10, lo: 1, hi: 4, count: 4},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.within/minute, "m"), func(t *testing.T) {
			n, b := windowOf(s, tt.within, testNow)
			if n != tt.n || b.Sum != tt.sum || b.Min != tt.lo || b.Max != tt.hi || float64(b.N) != tt.count {
				t.Errorf("window(%dm) = %d, %+v; want %d, sum %v, min %v, max %v, %v in buckets", tt.within/minute, n, b, tt.n, tt.sum, tt.lo, tt.hi, tt.count)
			}
		})
	}
	t.Run("empty", func(t *testing.T) {
		var e series
		if n, b := windowOf(&e, 0, testNow); n != 0 || b != (bucket{}) {
			t.Errorf("window of an empty series = %d, %+v", n, b)
		}
	})
	t.Run("negative values", func(t *testing.T) {
		s := build(true, live(3*minute, -2), live(2*minute, -7), live(minute, -1))
		if _, b := windowOf(s, hour, testNow); b.Min != -7 || b.Max != -1 || b.Sum != -10 {
			t.Errorf("window = %+v, want min -7, max -1, sum -10", b)
		}
	})
}

func TestSeriesMerge(t *testing.T) {
	tests := []struct {
		name      string
		into, o   []point
		want      string
		wantTotal uint64
		lo, hi    float64
	}{
		{"into empty", nil, []point{live(2*day, 3), live(minute, 1)}, "2910:1 1:1", 2, 1, 3},
		{"empty other", []point{live(minute, 1)}, nil, "1:1", 1, 1, 1},
		{"same minute adds up", []point{live(minute, 5)}, []point{live(minute, 2)}, "1:2", 2, 2, 5},
		{"interleaved", []point{live(3*minute, 1), live(minute, 1)}, []point{live(4*minute, 9), live(2*minute, -1)}, "4:1 3:1 2:1 1:1", 4, -1, 9},
		// The other profile was last updated two days ago: its minute buckets from then are
		// older than 24 hours now and become hour buckets.
		{"old minute buckets of the other become hours", []point{live(minute, 1)}, []point{live(2*day+5*minute, 2), live(2*day, 4)}, "2910:2 1:1", 3, 1, 4},
		{"an hour of each merges", []point{live(2*day, 1), live(0, 1)}, []point{late(2*day+10*minute, 8)}, "2910:2 0:1", 3, 1, 8},
		{"older than 90 days is dropped", []point{live(0, 1)}, []point{live(91*day, 7), live(89*day, 6)}, fmt.Sprint(89*day/minute+30, ":1 0:1"), 3, 1, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, o := build(true, tt.into...), build(true, tt.o...)
			s.merge(o, testNow)
			if got := layout(s); got != tt.want {
				t.Errorf("buckets = %q, want %q", got, tt.want)
			}
			if s.Total != tt.wantTotal {
				t.Errorf("Total = %d, want %d", s.Total, tt.wantTotal)
			}
			if _, b := windowOf(s, 0, testNow); b.N > 0 && (b.Min != tt.lo || b.Max != tt.hi) {
				t.Errorf("min, max = %v, %v; want %v, %v", b.Min, b.Max, tt.lo, tt.hi)
			}
		})
	}
}

func TestSeriesJSON(t *testing.T) {
	s := build(true, live(3*day, 0), live(2*hour, -1.5), live(minute, 2), live(minute, 4))
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back series
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&back, s) {
		t.Errorf("round trip of %s: %+v, want %+v", b, back, *s)
	}
}
