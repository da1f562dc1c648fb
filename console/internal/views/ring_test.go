package views

import (
	"slices"
	"testing"
)

// collect is the values seq points to, in its order.
func collect[T any](r *Ring[T], newest bool) []T {
	seq := r.All()
	if newest {
		seq = r.Newest()
	}
	var out []T
	for p := range seq {
		out = append(out, *p)
	}
	return out
}

// TestRingWrapAround: past its capacity a ring keeps the last values pushed, newest first from
// Newest and oldest first from All, and stops when the loop does.
func TestRingWrapAround(t *testing.T) {
	r := NewRing[int](3, nil)
	if got := collect(r, true); len(got) != 0 || r.Len() != 0 || r.Cap() != 3 {
		t.Fatalf("empty ring: %v, len %d, cap %d", got, r.Len(), r.Cap())
	}
	r.Push(1)
	r.Push(2)
	if got := collect(r, true); !slices.Equal(got, []int{2, 1}) {
		t.Fatalf("before wrapping, newest first: %v, want [2 1]", got)
	}
	for v := 3; v <= 7; v++ {
		r.Push(v)
	}
	if got := collect(r, true); !slices.Equal(got, []int{7, 6, 5}) || r.Len() != 3 {
		t.Fatalf("after wrapping, newest first: %v (len %d), want [7 6 5]", got, r.Len())
	}
	if got := collect(r, false); !slices.Equal(got, []int{5, 6, 7}) {
		t.Fatalf("after wrapping, oldest first: %v, want [5 6 7]", got)
	}
	var first []int
	for p := range r.Newest() {
		first = append(first, *p)
		break
	}
	if !slices.Equal(first, []int{7}) {
		t.Fatalf("a loop that breaks: %v, want [7]", first)
	}
}

// TestRingCapacityOne: a ring of one keeps the last value; a capacity under 1 is 1.
func TestRingCapacityOne(t *testing.T) {
	for _, capacity := range []int{1, 0} {
		r := NewRing[string](capacity, nil)
		r.Push("a")
		r.Push("b")
		if got := collect(r, true); !slices.Equal(got, []string{"b"}) || r.Len() != 1 || r.Cap() != 1 {
			t.Fatalf("capacity %d: %v (len %d, cap %d), want [b]", capacity, got, r.Len(), r.Cap())
		}
		if n := r.Remove(func(s *string) bool { return *s == "b" }); n != 1 || r.Len() != 0 {
			t.Fatalf("capacity %d: removed %d, len %d", capacity, n, r.Len())
		}
		r.Push("c")
		if got := collect(r, false); !slices.Equal(got, []string{"c"}) {
			t.Fatalf("capacity %d after a removal: %v, want [c]", capacity, got)
		}
	}
}

// TestRingRemove: removing values from a ring that has wrapped keeps the others in order, and
// the next values go after them; a removed value's slot is zeroed, or scrubbed.
func TestRingRemove(t *testing.T) {
	r := NewRing[string](4, nil)
	for _, v := range []string{"a", "x1", "b", "x2", "c", "x3"} { // holds b x2 c x3
		r.Push(v)
	}
	n := r.Remove(func(s *string) bool { return (*s)[0] == 'x' })
	if n != 2 {
		t.Fatalf("removed %d, want 2", n)
	}
	if slices.ContainsFunc(r.buf, func(s string) bool { return s != "" && s[0] == 'x' }) {
		t.Fatalf("a removed value is still in the ring's buffer: %q", r.buf)
	}
	r.Push("d")
	if got := collect(r, false); !slices.Equal(got, []string{"b", "c", "d"}) {
		t.Fatalf("after removing: %v, want [b c d]", got)
	}
	if r.Remove(func(*string) bool { return false }) != 0 {
		t.Fatal("removing nothing removed something")
	}

	scrubbed := 0
	s := NewRing[[]byte](2, func(b *[]byte) { clear(*b); *b = (*b)[:0]; scrubbed++ })
	s.Push([]byte("keep"))
	s.Push([]byte("drop"))
	dropped := *s.at(0)
	s.Remove(func(b *[]byte) bool { return string(*b) == "drop" })
	if scrubbed != 1 || string(dropped) != "\x00\x00\x00\x00" {
		t.Fatalf("scrubbed %d, the removed value's bytes %q: want 1 and zeroed", scrubbed, dropped)
	}
	if got := collect(s, false); len(got) != 1 || string(got[0]) != "keep" {
		t.Fatalf("after removing: %q, want [keep]", got)
	}
	if slot := s.Slot(); cap(*slot) < 4 {
		t.Fatalf("the scrubbed slot lost its buffer: cap %d", cap(*slot))
	}
}

// TestRingGrows: a ring of a large capacity starts small and grows with what it holds, keeping
// the values in order across each growth (a removal in between included), then wraps at its
// capacity.
func TestRingGrows(t *testing.T) {
	const capacity = 1000
	r := NewRing[int](capacity, nil)
	if len(r.buf) > ringFirstSlots {
		t.Fatalf("a new ring of %d holds %d slots, want at most %d", capacity, len(r.buf), ringFirstSlots)
	}
	var want []int
	for v := range 3 * capacity {
		if v == 100 { // a removal before the buffer is full: the kept values move to slot 0
			r.Remove(func(p *int) bool { return *p%2 == 0 })
			want = slices.DeleteFunc(want, func(x int) bool { return x%2 == 0 })
		}
		r.Push(v)
		want = append(want, v)
		if len(want) > capacity {
			want = want[len(want)-capacity:]
		}
		if r.Len() != len(want) || len(r.buf) > capacity || len(r.buf) < r.Len() {
			t.Fatalf("after %d: len %d (want %d), %d slots", v, r.Len(), len(want), len(r.buf))
		}
		if v%97 == 0 || v == 3*capacity-1 {
			if got := collect(r, false); !slices.Equal(got, want) {
				t.Fatalf("after %d, oldest first: %v, want %v", v, got, want)
			}
		}
	}
	if len(r.buf) != capacity || r.Cap() != capacity {
		t.Fatalf("%d slots, cap %d: want %d", len(r.buf), r.Cap(), capacity)
	}
}
