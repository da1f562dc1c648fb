package views

import (
	"slices"
	"testing"
)

// TestPaginate: a page holds at most limit values and says whether more follow; Filter and
// Skip choose which.
func TestPaginate(t *testing.T) {
	all := slices.Values([]int{1, 2, 3, 4, 5, 6})
	for _, tt := range []struct {
		limit int
		want  []int
		more  bool
	}{{2, []int{1, 2}, true}, {6, []int{1, 2, 3, 4, 5, 6}, false}, {10, []int{1, 2, 3, 4, 5, 6}, false}, {0, []int{1}, true}} {
		page, more := Paginate(all, tt.limit)
		if !slices.Equal(page, tt.want) || more != tt.more {
			t.Errorf("limit %d: %v, more %v; want %v, %v", tt.limit, page, more, tt.want, tt.more)
		}
	}
	even := Filter(all, func(v int) bool { return v%2 == 0 })
	if page, more := Paginate(Skip(even, 1), 1); !slices.Equal(page, []int{4}) || !more {
		t.Errorf("the second even value: %v, more %v; want [4], true", page, more)
	}
	if page, more := Paginate(Skip(even, 3), 5); len(page) != 0 || more || page == nil {
		t.Errorf("past the end: %#v, more %v; want an empty page", page, more)
	}
}
