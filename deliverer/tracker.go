package deliverer

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

type partKey struct {
	topic string
	part  int32
}

// tracker follows the records in progress of each partition, in offset order, so that offsets
// are committed only up to the lowest unfinished record: everything below the commit mark was
// delivered or handed on.
//
// Each assignment of a partition to this member is a generation. Records are added under the
// generation current when they were fetched (genOf, read right after the poll): a record of an
// earlier assignment — one still being dispatched when its partition was revoked, and maybe
// assigned back since — is not tracked. Its pending is never finished, so this member commits
// nothing for it: not past records the partition's next owner has not finished, and not out of
// offset order within a new assignment.
type tracker struct {
	mu    sync.Mutex
	parts map[partKey]*partState // the partitions assigned to this member
	gen   uint64
}

type partState struct {
	gen     uint64
	pending []*pending
	mark    *kgo.Record // all records up to and including it are finished
	dirty   bool        // mark moved since the last commit
}

// pending is one record in progress; finish it exactly once.
type pending struct {
	r    *kgo.Record
	gen  uint64
	done bool
	// after, when set, runs once p is finished, outside the tracker's lock (the gate of an
	// ordered destination: ordering.go).
	after func()
}

func newTracker() *tracker { return &tracker{parts: map[partKey]*partState{}} }

// assign starts a generation for each partition newly assigned to this member.
func (t *tracker) assign(parts map[string][]int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for topic, ps := range parts {
		for _, p := range ps {
			if k := (partKey{topic, p}); t.parts[k] == nil {
				t.gen++
				t.parts[k] = &partState{gen: t.gen}
			}
		}
	}
}

// genOf is the generation of partition k's current assignment; 0: not assigned.
func (t *tracker) genOf(k partKey) uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ps := t.parts[k]; ps != nil {
		return ps.gen
	}
	return 0
}

// add starts tracking r, fetched under generation gen (records of one partition must be added
// in offset order). A record of another generation than the current one is not tracked.
func (t *tracker) add(r *kgo.Record, gen uint64) *pending {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.parts[partKey{r.Topic, r.Partition}]
	if ps == nil || ps.gen != gen {
		return &pending{r: r} // gen 0: finish ignores it
	}
	p := &pending{r: r, gen: ps.gen}
	ps.pending = append(ps.pending, p)
	return p
}

// finish marks p done and advances its partition's commit mark over finished records. A record
// of a partition revoked since it was added is ignored (its new owner reads it again).
func (t *tracker) finish(p *pending) {
	if p.after != nil {
		defer p.after()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.parts[partKey{p.r.Topic, p.r.Partition}]
	if ps == nil || ps.gen != p.gen {
		return
	}
	p.done = true
	i := 0
	for i < len(ps.pending) && ps.pending[i].done {
		ps.mark = ps.pending[i].r
		ps.dirty = true
		i++
	}
	if i > 0 {
		n := copy(ps.pending, ps.pending[i:])
		clear(ps.pending[n:])
		ps.pending = ps.pending[:n]
	}
}

// commitMarks returns the offsets to commit for partitions whose mark moved (all of them when
// onlyDirty is false), limited to topics/partitions of only when it is not nil.
func (t *tracker) commitMarks(onlyDirty bool, only map[string][]int32) map[string]map[int32]kgo.EpochOffset {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]map[int32]kgo.EpochOffset{}
	for k, ps := range t.parts {
		if ps.mark == nil || (onlyDirty && !ps.dirty) {
			continue
		}
		if only != nil && !contains(only[k.topic], k.part) {
			continue
		}
		ps.dirty = false
		if out[k.topic] == nil {
			out[k.topic] = map[int32]kgo.EpochOffset{}
		}
		out[k.topic][k.part] = kgo.EpochOffset{Epoch: ps.mark.LeaderEpoch, Offset: ps.mark.Offset + 1}
	}
	return out
}

// drop forgets the partitions (revoked or lost): their generation ends.
func (t *tracker) drop(parts map[string][]int32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for topic, ps := range parts {
		for _, p := range ps {
			delete(t.parts, partKey{topic, p})
		}
	}
}

// newest is the offset of the last record of partition k added and not yet committed past
// (false: none).
func (t *tracker) newest(k partKey) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.parts[k]
	if ps == nil || len(ps.pending) == 0 {
		return 0, false
	}
	return ps.pending[len(ps.pending)-1].r.Offset, true
}

// inProgress counts the records not finished.
func (t *tracker) inProgress() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, ps := range t.parts {
		for _, p := range ps.pending {
			if !p.done {
				n++
			}
		}
	}
	return n
}

func contains(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
