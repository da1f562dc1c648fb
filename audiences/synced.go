package audiences

import (
	"iter"
	"sync"
	"sync/atomic"
)

// sent is what the last sync sent for one audience or computed trait: for an audience, that
// the user is a member (only members are kept); for a computed trait, the value, as a hash of
// its JSON (valueHash): all a sync needs to tell whether the value changed, in 8 bytes
// instead of the value. The synced id and version are the same in every profile synced with
// that version, so an entry holds their number (syncKeyNumber), not the strings. Its JSON is
// {"id","v","h"} (sentJSON).
type sent struct {
	K uint32 // the number of its syncKey
	H hash
}

// syncKey is a synced definition: "a/<id>" or "t/<id>", and its version.
type syncKey struct{ ID, Version string }

func (e sent) id() string      { return syncKeyOf(e.K).ID }
func (e sent) version() string { return syncKeyOf(e.K).Version }

// sentJSON is the changelog form of a sent.
type sentJSON struct {
	ID      string `json:"id"` // "a/<id>" or "t/<id>"
	Version string `json:"v"`
	H       hash   `json:"h,omitempty"`
}

// syncKeys numbers the synced keys of the process: a profile's synced entry holds a 4-byte
// number instead of the id and version (docs/audiences.md#memory). A number is never reused
// and a key never forgotten: there is one per version of a definition the process has seen,
// a few per config change. Numbers are read without a lock (keys is replaced, never changed,
// when a key is added).
var syncKeys = struct {
	mu      sync.Mutex
	numbers map[syncKey]uint32
	keys    atomic.Pointer[[]syncKey]
}{numbers: map[syncKey]uint32{}}

// syncKeyNumber is the number of the key (id, version), given it when it has none.
func syncKeyNumber(id, version string) uint32 {
	k := syncKey{id, version}
	syncKeys.mu.Lock()
	defer syncKeys.mu.Unlock()
	if n, ok := syncKeys.numbers[k]; ok {
		return n
	}
	var keys []syncKey
	if old := syncKeys.keys.Load(); old != nil {
		keys = append(keys, *old...)
	}
	n := uint32(len(keys))
	keys = append(keys, k)
	syncKeys.keys.Store(&keys)
	syncKeys.numbers[k] = n
	return n
}

// syncKeyOf is the key numbered n.
func syncKeyOf(n uint32) syncKey { return (*syncKeys.keys.Load())[n] }

// syncedList is what the last sync sent: its entries (sent) packed in 32-bit words. An entry
// is one word, its key's number shifted left by one, and when its hash is not 0 (a computed
// trait's value; an audience's entry has none) the low bit is set and the hash follows in two
// more words. An audience's entry is 4 bytes, a computed trait's 12, where a []sent takes 16
// each (docs/audiences.md#memory). Entries keep the order they were added in.
type syncedList []uint32

// at is the entry that starts at word i, and its length in words.
func (l syncedList) at(i int) (sent, int) {
	w := l[i]
	e := sent{K: w >> 1}
	if w&1 == 0 {
		return e, 1
	}
	e.H = hash(uint64(l[i+1]) | uint64(l[i+2])<<32)
	return e, 3
}

// all yields the entries, in their order.
func (l syncedList) all() iter.Seq[sent] {
	return func(yield func(sent) bool) {
		for i := 0; i < len(l); {
			e, n := l.at(i)
			if !yield(e) {
				return
			}
			i += n
		}
	}
}

// find is the entry of the synced id ("a/<id>" or "t/<id>"), and where it is (words).
func (l syncedList) find(id string) (e sent, at, n int, ok bool) {
	if len(l) == 0 {
		return sent{}, 0, 0, false
	}
	keys := *syncKeys.keys.Load() // (l's keys are numbered)
	for i := 0; i < len(l); i += n {
		e, n = l.at(i)
		if keys[e.K].ID == id {
			return e, i, n, true
		}
	}
	return sent{}, len(l), 0, false
}

// with is l with the entry of id set to (version, h) (keep), or without it (!keep): l's
// entries in their order, a new one last. An entry of the same length is changed in place;
// else the list is made anew, of the exact length.
func (l syncedList) with(id, version string, h hash, keep bool) syncedList {
	_, at, n, found := l.find(id)
	if !found && !keep {
		return l
	}
	var buf [3]uint32
	entry := buf[:0]
	if keep {
		entry = appendSynced(entry, id, version, h)
	}
	if found && len(entry) == n {
		copy(l[at:], entry)
		return l
	}
	size := len(l) - n + len(entry)
	if size == 0 {
		return nil
	}
	out := make(syncedList, 0, size)
	out = append(out, l[:at]...)
	out = append(out, entry...)
	return append(out, l[at+n:]...)
}

// appendSynced appends the words of the entry (id, version, h) to l.
func appendSynced(l []uint32, id, version string, h hash) []uint32 {
	k := syncKeyNumber(id, version) << 1
	if h == 0 {
		return append(l, k)
	}
	return append(l, k|1, uint32(h), uint32(h>>32))
}

// synced is what the last sync sent for the synced id ("a/<id>" or "t/<id>"); ok false: none.
func (p *profile) synced(id string) (e sent, ok bool) {
	e, _, _, ok = p.Synced.find(id)
	return e, ok
}

// setSynced records what a sync sent for id: (version, h), or nothing (!keep).
func (p *profile) setSynced(id, version string, h hash, keep bool) {
	p.Synced = p.Synced.with(id, version, h, keep)
}
