package views

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// PendingRecord is one message waiting in a retry tier for its next attempt: the headers of its
// newest tier record (never its body).
type PendingRecord struct {
	DestinationID, MessageID, Type string
	// User is whose message it is: the record key after "<destinationId>:" (the userId, else
	// the anonymousId), for forgetting (Forget).
	User string
	// Topic, Partition and Offset locate the tier record (schemas.RetryNowKey).
	Topic     string
	Partition int32
	Offset    int64
	// Attempt is the number of the attempt its tier will make.
	Attempt   int
	Deferrals int
	// DueAt is when its tier attempts it (header due-at).
	DueAt, FirstAttemptAt, WrittenAt time.Time
	LastError                        string
	LastStatus                       int
	// URL is the one URL of a dead letter replayed to another URL (header url), redacted.
	URL string
	// RetryNow is the state of its retry-now (schemas.RetryNow*, or RetryNowRequested), ""
	// when none; RetryNowAt when that state was written.
	RetryNow   string
	RetryNowAt time.Time
}

// Key is the tier record's schemas.RetryNowKey.
func (p *PendingRecord) Key() string { return schemas.RetryNowKey(p.Topic, p.Partition, p.Offset) }

// RetryNowRequested is the state of a retry-now the console sent and no deliverer marked yet;
// it counts for RetryNowRequestedFor.
const RetryNowRequested = "requested"

// RetryNowRequestedFor is how long a requested retry-now shows without a deliverer's mark (one
// that skipped the copy at once writes none).
const RetryNowRequestedFor = 10 * time.Second

// TopicPartition names a partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Pending follows the retry tiers (webhooks.retry.<delay>) and the retry-now marks
// (webhooks.retried-now): per destination, each message waiting in a tier, by its newest tier
// record. A record leaves when the deliverer's group committed past it (SetCommitted: it was
// delivered, handed on to another tier or the DLQ, or dropped), when a newer tier record of
// the same message arrives, or when a retry-now delivered it. At most max messages are kept per
// destination (the soonest read); Dropped counts those not kept. Safe for concurrent use.
type Pending struct {
	mu        sync.Mutex
	max       int
	dests     map[string]*pendingDest
	committed map[TopicPartition]int64
	marks     map[string]pendingMark
	pruned    time.Time
}

type pendingDest struct {
	byMsg   map[string]*PendingRecord
	dropped int
}

type pendingMark struct {
	state string
	at    time.Time
}

// NewPending returns an empty view keeping at most max messages per destination.
func NewPending(max int) *Pending {
	return &Pending{max: max, dests: map[string]*pendingDest{}, committed: map[TopicPartition]int64{}, marks: map[string]pendingMark{}}
}

// Add records a tier record; false when it is not kept (consumed already, older than the
// message's record kept, or past the destination's bound).
func (v *Pending) Add(rec PendingRecord) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if rec.Offset < v.committed[TopicPartition{rec.Topic, rec.Partition}] {
		return false
	}
	d := v.dests[rec.DestinationID]
	if d == nil {
		d = &pendingDest{byMsg: map[string]*PendingRecord{}}
		v.dests[rec.DestinationID] = d
	}
	if cur, ok := d.byMsg[rec.MessageID]; ok {
		if newer(cur, &rec) {
			return false
		}
	} else if len(d.byMsg) >= v.max {
		d.dropped++
		return false
	}
	d.byMsg[rec.MessageID] = &rec
	return true
}

// newer says whether a was written after b: later, or further in the same partition.
func newer(a, b *PendingRecord) bool {
	if a.Topic == b.Topic && a.Partition == b.Partition {
		return a.Offset > b.Offset
	}
	return a.WrittenAt.After(b.WrittenAt)
}

// SetCommitted records the deliverer group's committed offsets of the tier partitions (the next
// offset it reads) and removes the records below them.
func (v *Pending) SetCommitted(offsets map[TopicPartition]int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for tp, o := range offsets {
		v.committed[tp] = o
	}
	for id, d := range v.dests {
		for m, r := range d.byMsg {
			if r.Offset < v.committed[TopicPartition{r.Topic, r.Partition}] {
				delete(d.byMsg, m)
			}
		}
		if len(d.byMsg) == 0 {
			delete(v.dests, id)
		}
	}
}

// Mark records the retry-now state of tier record key (schemas.RetryNowKey), written at at.
// Marks older than a day are forgotten: a tier record is due within its tier's delay.
func (v *Pending) Mark(key, state string, at time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.marks[key] = pendingMark{state: state, at: at}
	if at.Sub(v.pruned) > time.Hour {
		v.pruned = at
		for k, m := range v.marks {
			if at.Sub(m.at) > 24*time.Hour {
				delete(v.marks, k)
			}
		}
	}
}

// List returns the destination's waiting messages, soonest due first (then by message id),
// each with its retry-now state, and how many were not kept (past the bound). A message a
// retry-now delivered is not listed: its tier record will be finished unsent.
func (v *Pending) List(destID string, now time.Time) (recs []PendingRecord, dropped int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	d := v.dests[destID]
	if d == nil {
		return nil, 0
	}
	recs = make([]PendingRecord, 0, len(d.byMsg))
	for _, r := range d.byMsg {
		c := *r
		v.withMark(&c, now)
		if c.RetryNow == schemas.RetryNowDelivered {
			continue
		}
		recs = append(recs, c)
	}
	slices.SortFunc(recs, func(a, b PendingRecord) int {
		return cmp.Or(a.DueAt.Compare(b.DueAt), cmp.Compare(a.MessageID, b.MessageID))
	})
	return recs, d.dropped
}

// withMark sets r's retry-now state. v.mu is held.
func (v *Pending) withMark(r *PendingRecord, now time.Time) {
	m, ok := v.marks[r.Key()]
	if !ok || (m.state == RetryNowRequested && now.Sub(m.at) > RetryNowRequestedFor) {
		return
	}
	r.RetryNow, r.RetryNowAt = m.state, m.at
}

// Forget drops the waiting messages whose user hides says are forgotten (received at their
// first attempt), and returns their message ids and how many it dropped.
func (v *Pending) Forget(hides func(user string, received time.Time) bool) (ids []string, n int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for id, d := range v.dests {
		for m, r := range d.byMsg {
			if hides(r.User, r.FirstAttemptAt) {
				ids = append(ids, r.MessageID)
				delete(d.byMsg, m)
				n++
			}
		}
		if len(d.byMsg) == 0 {
			delete(v.dests, id)
		}
	}
	return ids, n
}

// Prune drops the destinations keep returns false for.
func (v *Pending) Prune(keep func(dest string) bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for id := range v.dests {
		if !keep(id) {
			delete(v.dests, id)
		}
	}
}

// Count is the number of the destination's waiting messages (those List returns).
func (v *Pending) Count(destID string, now time.Time) int {
	recs, _ := v.List(destID, now)
	return len(recs)
}

// Retryable returns the destination's waiting messages a retry-now may send — those listed
// (every one when ids is empty) whose retry-now is neither in progress nor done — and the ids
// listed that are not waiting (or were retried now already).
func (v *Pending) Retryable(destID string, ids []string, now time.Time) (recs []PendingRecord, notPending []string) {
	all, _ := v.List(destID, now)
	ok := func(r *PendingRecord) bool {
		switch r.RetryNow {
		case "", schemas.RetryNowFailed, schemas.RetryNowSkipped:
			return true
		}
		return false
	}
	if len(ids) == 0 {
		for i := range all {
			if ok(&all[i]) {
				recs = append(recs, all[i])
			}
		}
		return recs, nil
	}
	byID := make(map[string]*PendingRecord, len(all))
	for i := range all {
		byID[all[i].MessageID] = &all[i]
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if r := byID[id]; r != nil && ok(r) {
			recs = append(recs, *r)
		} else {
			notPending = append(notPending, id)
		}
	}
	return recs, notPending
}
