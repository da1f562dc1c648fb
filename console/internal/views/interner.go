package views

// Interner shares one string among the records that repeat a value (destination ids, error
// classes, message types), so that reading one allocates nothing. Bounded: it starts again
// when full. Not safe for concurrent use: a view's goroutine owns it.
type Interner map[string]string

// MaxInterned is how many strings an Interner holds before it starts again.
const MaxInterned = 4096

// Get is string(b), shared.
func (in Interner) Get(b []byte) string {
	if s, ok := in[string(b)]; ok {
		return s
	}
	if len(in) >= MaxInterned {
		clear(in)
	}
	s := string(b)
	in[s] = s
	return s
}
