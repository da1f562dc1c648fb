package views

// slab holds values of T by slot number, allocated chunk at a time: a view that keeps many
// small entries keeps them in a few large arrays, linked by slot numbers rather than pointers,
// so the garbage collector has few objects to find and, when T holds no pointer, nothing in
// them to follow (docs/benchmarks.md#the-views-and-the-garbage-collector). Freed slots are used
// again first. Not safe for concurrent use: its view's lock guards it.
type slab[T any] struct {
	shift  uint8 // a chunk holds 1<<shift values
	chunks [][]T
	used   int32   // slots handed out once
	free   []int32 // slots freed since
}

// newSlab is an empty slab allocating 1<<shift values at a time.
func newSlab[T any](shift uint8) slab[T] { return slab[T]{shift: shift} }

// at is the value in slot.
func (s *slab[T]) at(slot int32) *T { return &s.chunks[slot>>s.shift][slot&(1<<s.shift-1)] }

// alloc is a free slot, holding T's zero value.
func (s *slab[T]) alloc() int32 {
	if n := len(s.free); n > 0 {
		slot := s.free[n-1]
		s.free = s.free[:n-1]
		return slot
	}
	if s.used == int32(len(s.chunks))<<s.shift {
		s.chunks = append(s.chunks, make([]T, 1<<s.shift))
	}
	s.used++
	return s.used - 1
}

// release zeroes slot's value and frees the slot.
func (s *slab[T]) release(slot int32) {
	var zero T
	*s.at(slot) = zero
	s.free = append(s.free, slot)
}
