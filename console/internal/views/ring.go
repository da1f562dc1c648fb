package views

import "iter"

// Ring keeps the last Cap values pushed: a push beyond Cap overwrites the oldest. Its buffer
// grows with the values pushed, doubling up to Cap, so that a ring of a large capacity (the
// audit trail's 50,000 records) costs only what it holds. Not safe for concurrent use: the
// view that holds it locks it.
type Ring[T any] struct {
	buf   []T
	limit int // Cap
	next  int // the slot the next push writes
	size  int
	scrub func(*T)
}

// ringFirstSlots is the buffer a new ring starts with.
const ringFirstSlots = 64

// NewRing is an empty ring of capacity values (at least 1). scrub, when set, empties a removed
// value's slot in place (so that it keeps its buffers); nil sets it to the zero value.
func NewRing[T any](capacity int, scrub func(*T)) *Ring[T] {
	limit := max(capacity, 1)
	return &Ring[T]{buf: make([]T, min(limit, ringFirstSlots)), limit: limit, scrub: scrub}
}

// Len is how many values the ring holds.
func (r *Ring[T]) Len() int { return r.size }

// Cap is how many values the ring keeps.
func (r *Ring[T]) Cap() int { return r.limit }

// Push adds v as the newest value.
func (r *Ring[T]) Push(v T) { *r.Slot() = v }

// Slot makes room for a newest value and returns its slot, holding what the slot held before
// (the oldest value, or a removed one's scrubbed remains): the caller overwrites it, reusing
// its buffers.
func (r *Ring[T]) Slot() *T {
	if r.size == len(r.buf) && len(r.buf) < r.limit {
		// Full below its capacity: a larger buffer, oldest first from slot 0.
		buf := make([]T, min(2*len(r.buf), r.limit))
		n := copy(buf, r.buf[r.next:])
		copy(buf[n:], r.buf[:r.next])
		r.buf, r.next = buf, r.size
	}
	s := &r.buf[r.next]
	r.next = (r.next + 1) % len(r.buf)
	r.size = min(r.size+1, len(r.buf))
	return s
}

// at is the i-th newest value's slot (0: the newest).
func (r *Ring[T]) at(i int) *T {
	return &r.buf[(r.next-1-i+2*len(r.buf))%len(r.buf)]
}

// Newest yields the values newest first, as pointers into the ring: valid while the caller
// holds the view's lock, and not to be kept.
func (r *Ring[T]) Newest() iter.Seq[*T] {
	return func(yield func(*T) bool) {
		for i := range r.size {
			if !yield(r.at(i)) {
				return
			}
		}
	}
}

// All yields the values oldest first, as Newest does.
func (r *Ring[T]) All() iter.Seq[*T] {
	return func(yield func(*T) bool) {
		for i := r.size - 1; i >= 0; i-- {
			if !yield(r.at(i)) {
				return
			}
		}
	}
}

// Remove drops the values drop returns true for, keeping the others in order, and returns how
// many it dropped. A dropped value's slot is emptied (scrubbed, or zeroed) and reused after
// the kept ones.
func (r *Ring[T]) Remove(drop func(*T) bool) int {
	kept := make([]T, 0, r.size)
	var freed []T
	for v := range r.All() {
		if drop(v) {
			freed = append(freed, *v)
			continue
		}
		kept = append(kept, *v)
	}
	if len(freed) == 0 {
		return 0
	}
	for i := range freed {
		if r.scrub != nil {
			r.scrub(&freed[i])
		} else {
			var zero T
			freed[i] = zero
		}
	}
	// Oldest first from slot 0, the emptied ones after them: with a scrub, every slot keeps
	// buffers of its own. Slots beyond them held nothing, or values now copied forward: zero
	// those that are not reused.
	n := copy(r.buf, append(kept, freed...))
	if r.scrub == nil {
		clear(r.buf[n:])
	}
	r.next, r.size = len(kept)%len(r.buf), len(kept)
	return len(freed)
}
