package views

import (
	"slices"
	"sync"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// DLQ follows webhooks.dlq and its replay marks (webhooks.dlq.replayed): per destination the
// count of messages not replayed yet (the overview), and the last max dead letters' headers,
// newest last (the DLQ lists of the API and the UI), so that no page reads the DLQ topic. A
// message's newest dead letter stands for it (platform.DeadLetter.MessageKey): a replay that
// failed again dead-letters the message anew, and the view counts and lists it once. Replaying
// still reads the topic (platform.ReplayDeadLetters): it needs the bodies. Safe for concurrent
// use.
type DLQ struct {
	mu    sync.Mutex
	max   int
	dests map[string]*destDLQ
}

// destDLQ is one destination's part of the view.
type destDLQ struct {
	// newest is where each message's newest dead letter read is, by MessageKey (a position,
	// not the dead letter: the view holds one per message of the whole DLQ).
	newest map[string]dlqPos
	// replayed holds the replay marks by "partition:offset" (the last replay) that may still
	// matter: a mark of a dead letter superseded by a newer one is dropped.
	replayed map[string]time.Time
	pending  int // messages whose newest dead letter is not marked replayed
	last     []dlqEntry
}

// dlqEntry is a dead letter of the list, with whose message it is: its userId, else its
// anonymousId (the record's key after the destination id).
type dlqEntry struct {
	platform.DeadLetter
	user string
}

// Received is about when the dead letter's message was accepted: its first attempt, else when
// it was dead-lettered.
func Received(dl *platform.DeadLetter) time.Time {
	if !dl.FirstAttemptAt.IsZero() {
		return dl.FirstAttemptAt
	}
	return dl.At
}

// remove drops the dead letters of the list drop returns true for, and their messages from
// the count; called with the view's lock held. It returns how many it dropped.
func (d *destDLQ) remove(drop func(*dlqEntry) bool) int {
	n := len(d.last)
	d.last = slices.DeleteFunc(d.last, func(e dlqEntry) bool {
		if !drop(&e) {
			return false
		}
		k := e.MessageKey()
		if cur, ok := d.newest[k]; ok && cur.partition == e.Partition && cur.offset == e.Offset {
			delete(d.newest, k)
			if d.replayed[e.MarkerKey()].IsZero() {
				d.pending--
			}
		}
		delete(d.replayed, e.MarkerKey())
		return true
	})
	return n - len(d.last)
}

// NewDLQ is an empty view listing the last max dead letters of each destination.
func NewDLQ(max int) *DLQ {
	return &DLQ{max: max, dests: map[string]*destDLQ{}}
}

func (c *DLQ) dest(id string) *destDLQ {
	d := c.dests[id]
	if d == nil {
		d = &destDLQ{newest: map[string]dlqPos{}, replayed: map[string]time.Time{}}
		c.dests[id] = d
	}
	return d
}

// dlqPos is where a dead letter is in webhooks.dlq, and when it was written.
type dlqPos struct {
	partition int32
	offset    int64
	at        time.Time
}

func posOf(dl platform.DeadLetter) dlqPos { return dlqPos{dl.Partition, dl.Offset, dl.At} }

func (p dlqPos) deadLetter() platform.DeadLetter {
	return platform.DeadLetter{Partition: p.partition, Offset: p.offset, At: p.at}
}

func (p dlqPos) markerKey() string { return p.deadLetter().MarkerKey() }

// Add records a dead letter read, of user's message, unless hides reports it (checked under
// the view's lock: a purge changes the rules, then takes it); false when it did not.
func (c *DLQ) Add(dl platform.DeadLetter, user string, hides func(user string, received time.Time) bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if hides != nil && hides(user, Received(&dl)) {
		return false
	}
	d := c.dest(dl.DestinationID)
	k := dl.MessageKey()
	if cur, ok := d.newest[k]; ok {
		if !dl.Supersedes(cur.deadLetter()) {
			delete(d.replayed, dl.MarkerKey()) // read late; superseded already
			return true
		}
		if d.replayed[cur.markerKey()].IsZero() {
			d.pending--
		}
		delete(d.replayed, cur.markerKey())
	}
	d.newest[k] = posOf(dl)
	if d.replayed[dl.MarkerKey()].IsZero() {
		d.pending++
	}
	if len(d.last) == c.max {
		d.last = slices.Delete(d.last, 0, 1)
	}
	d.last = append(d.last, dlqEntry{DeadLetter: dl, user: user})
	return true
}

// Mark records a replay mark of the dead letter with marker key key, of message msg (a dead
// letter with these destination and message ids).
func (c *DLQ) Mark(key string, msg platform.DeadLetter, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mark(key, msg, at)
}

// MarkReplayed records the replay of dead letters done at at, as their replay marks will.
func (c *DLQ) MarkReplayed(done []platform.DeadLetter, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range done {
		c.mark(d.MarkerKey(), d, at)
	}
}

func (c *DLQ) mark(key string, msg platform.DeadLetter, at time.Time) {
	d := c.dest(msg.DestinationID)
	cur, ok := d.newest[msg.MessageKey()]
	newest := ok && cur.markerKey() == key
	if ok && !newest {
		if p, o, ok := schemas.ParseReplayMarkKey(key); ok && p == cur.partition && o < cur.offset {
			return // of a dead letter superseded already
		}
	}
	if newest && d.replayed[key].IsZero() {
		d.pending--
	}
	if at.After(d.replayed[key]) {
		d.replayed[key] = at
	}
}

// Pending returns the destination's messages not replayed yet.
func (c *DLQ) Pending(dest string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dests[dest]
	if d == nil {
		return 0
	}
	return d.pending
}

// List returns the messages of the destination's last dead letters, newest first, each once (its
// newest dead letter) with when it was replayed; those replayed before only with again.
func (c *DLQ) List(dest string, again bool) []platform.DeadLetter {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dests[dest]
	if d == nil {
		return nil
	}
	out := make([]platform.DeadLetter, 0, min(len(d.last), len(d.newest)))
	for _, e := range slices.Backward(d.last) {
		dl := e.DeadLetter
		if n := d.newest[dl.MessageKey()]; n.partition != dl.Partition || n.offset != dl.Offset {
			continue // superseded by a newer dead letter of the message
		}
		dl.ReplayedAt = d.replayed[dl.MarkerKey()]
		if again || dl.ReplayedAt.IsZero() {
			out = append(out, dl)
		}
	}
	return out
}

// Forget drops the dead letters hides reports for their message's user and when it was
// received, and their messages from the counts; it returns their message ids and how many it
// dropped.
func (c *DLQ) Forget(hides func(user string, received time.Time) bool) (ids []string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.dests {
		n += d.remove(func(e *dlqEntry) bool {
			if !hides(e.user, Received(&e.DeadLetter)) {
				return false
			}
			ids = append(ids, e.MessageID)
			return true
		})
	}
	return ids, n
}

// Prune drops the part of every destination keep returns false for.
func (c *DLQ) Prune(keep func(dest string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.dests {
		if !keep(id) {
			delete(c.dests, id)
		}
	}
}
