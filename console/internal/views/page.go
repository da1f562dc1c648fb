package views

import "iter"

// MaxPage bounds a page of a list.
const MaxPage = 1000

// Paginate takes the first limit values of seq (at least 1), and reports whether seq has more:
// the page of a list, for the API and the UI alike.
func Paginate[T any](seq iter.Seq[T], limit int) (page []T, more bool) {
	limit = max(limit, 1)
	page = make([]T, 0, min(limit, 64))
	for v := range seq {
		if len(page) == limit {
			return page, true
		}
		page = append(page, v)
	}
	return page, false
}

// Filter yields the values of seq keep returns true for.
func Filter[T any](seq iter.Seq[T], keep func(T) bool) iter.Seq[T] {
	return func(yield func(T) bool) {
		for v := range seq {
			if keep(v) && !yield(v) {
				return
			}
		}
	}
}

// Skip yields the values of seq after its first n.
func Skip[T any](seq iter.Seq[T], n int) iter.Seq[T] {
	return func(yield func(T) bool) {
		i := 0
		for v := range seq {
			if i++; i > n && !yield(v) {
				return
			}
		}
	}
}
