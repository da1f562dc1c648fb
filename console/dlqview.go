package console

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// dlqView follows webhooks.dlq and its replay marks (webhooks.dlq.replayed): per destination
// the count of messages not replayed yet (the overview), and the last DLQPerDestination dead
// letters' headers, newest last (the DLQ lists of the API and the UI), so that no page reads the
// DLQ topic. A message's newest dead letter stands for it (platform.DeadLetter.MessageKey): a
// replay that failed again dead-letters the message anew, and the view counts and lists it
// once. Replaying still reads the topic (platform.ReplayDeadLetters): it needs the bodies.
type dlqView struct {
	mu    sync.Mutex
	max   int
	dests map[string]*destDLQ
	ready chan struct{}
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

// received is about when the dead letter's message was accepted: its first attempt, else when
// it was dead-lettered.
func (e *dlqEntry) received() time.Time {
	if !e.FirstAttemptAt.IsZero() {
		return e.FirstAttemptAt
	}
	return e.At
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

func newDLQView(max int) *dlqView {
	return &dlqView{max: max, dests: map[string]*destDLQ{}, ready: make(chan struct{})}
}

func (c *dlqView) dest(id string) *destDLQ {
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

// add records a dead letter read, of user's message; called with mu held.
func (c *dlqView) add(dl platform.DeadLetter, user string) {
	d := c.dest(dl.DestinationID)
	k := dl.MessageKey()
	if cur, ok := d.newest[k]; ok {
		if !dl.Supersedes(cur.deadLetter()) {
			delete(d.replayed, dl.MarkerKey()) // read late; superseded already
			return
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
}

// mark records a replay mark of the dead letter with marker key key, of message msg (a dead
// letter with these destination and message ids); called with mu held.
func (c *dlqView) mark(key string, msg platform.DeadLetter, at time.Time) {
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

// pending returns the destination's messages not replayed yet.
func (c *dlqView) pending(dest string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dests[dest]
	if d == nil {
		return 0
	}
	return d.pending
}

// list returns the messages of the destination's last dead letters, newest first, each once (its
// newest dead letter) with when it was replayed; those replayed before only with again.
func (c *dlqView) list(dest string, again bool) []platform.DeadLetter {
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

// runDLQView keeps the view: both topics from their start, once the rules of what the console
// forgets were read (docs/console.md#what-the-console-forgets).
func (s *Service) runDLQView(ctx context.Context) error {
	if !waitReady(ctx, s.forget.ready) {
		return nil
	}
	c := s.dlq
	return s.runView(ctx, "dlq", c.ready, platform.TopicReaderConfig{
		Topics: []string{s.cfg.DLQTopic, s.cfg.DLQReplayedTopic},
		Apply: func(r *kgo.Record) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if r.Topic == s.cfg.DLQTopic {
				dl := platform.DeadLetterOf(r)
				if dl.DestinationID == "" {
					return
				}
				// Keyed <destinationId>:<userId, else anonymousId>: whose message it is.
				user, _ := strings.CutPrefix(string(r.Key), dl.DestinationID+":")
				e := dlqEntry{DeadLetter: dl, user: user}
				if s.forget.hides(e.user, e.received()) {
					s.metrics.forgotten.WithLabelValues("dlq").Inc()
					s.forget.forgetMessages([]string{dl.MessageID})
					return
				}
				c.add(dl, e.user)
				return
			}
			m, ok := replayMarkOf(r.Value)
			if !ok || m.DestinationID == "" {
				return
			}
			at, err := schemas.ParseTimestamp(m.ReplayedAt)
			if err != nil {
				at = r.Timestamp
			}
			msg := platform.DeadLetter{DestinationID: m.DestinationID, MessageID: m.MessageID}
			if m.MessageID == "" { // a dead letter without a message id stands alone
				p, o, _ := schemas.ParseReplayMarkKey(string(r.Key))
				msg.Partition, msg.Offset = p, o
			}
			c.mark(string(r.Key), msg, at)
		},
	}, nil)
}

// replayMarkNames are the JSON names of schemas.ReplayMark's fields, in their order.
var replayMarkNames = []string{"replayedAt", "destinationId", "messageId", "url", "supersededBy"}

// replayMarkOf reads a webhooks.dlq.replayed record as schemas.DecodeReplayMark would
// (console/decode.go); false when it cannot be read.
func replayMarkOf(b []byte) (schemas.ReplayMark, bool) {
	if len(b) == 0 {
		return schemas.ReplayMark{}, false
	}
	var f [5][]byte
	err := schemas.EachMember(b, func(key, v []byte) error {
		i, err := fieldIndex(key, replayMarkNames)
		if i < 0 {
			return err
		}
		return decodeString(v, &f[i])
	})
	if err != nil && !errors.Is(err, errWrongType) {
		m, err := schemas.DecodeReplayMark(b) // the scanner refused it, or a key it cannot match
		return m, err == nil
	}
	return schemas.ReplayMark{ReplayedAt: string(f[0]), DestinationID: string(f[1]), MessageID: string(f[2]),
		URL: string(f[3]), SupersededBy: string(f[4])}, err == nil
}
