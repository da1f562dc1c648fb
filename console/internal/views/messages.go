package views

import (
	"cmp"
	"hash/maphash"
	"iter"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// The messages view (docs/console.md#messages): webhooks.attempts grouped by message. Per
// destination it keeps the last perDest messages, each with its attempts across URLs, tiers
// and replays, and its status; indexes by user id and anonymous id find a user's messages
// without a scan (an event name or a type, a few values each, is found by scanning the
// destination's messages newest first: a page fills long before the end, and a view of few
// keys would cost every record two more index updates). Bounded: a new message beyond
// perDest, or an answer that takes the destination's answers over bodyBudget bytes, drops the
// destination's oldest messages.

// MessageFacts is what an attempt record says of its message and of the endpoint's answer
// (schemas.AttemptRecord's newer members; empty on a record of an older deliverer).
type MessageFacts struct {
	Type        string    `json:"type,omitempty"`
	Event       string    `json:"event,omitempty"`
	UserID      string    `json:"userId,omitempty"`
	AnonymousID string    `json:"anonymousId,omitempty"`
	ReceivedAt  time.Time `json:"-"`
	// NextAttemptAt: the delivery was handed to a retry tier, due then; DeadLettered: it went
	// to the DLQ with this reason.
	NextAttemptAt   time.Time         `json:"-"`
	DeadLettered    string            `json:"-"`
	ResponseHeaders map[string]string `json:"-"`
	ResponseBody    string            `json:"-"`
}

// Message statuses (Message.Status).
const (
	// StatusDelivered: a URL answered 2xx (a message is done when one URL took it,
	// docs/delivery.md#one-attempt).
	StatusDelivered = "delivered"
	// StatusRetrying: it waits on a retry tier (or its attempt records say nothing more yet).
	StatusRetrying = "retrying"
	// StatusDeadLettered: the deliverer sent it to the DLQ.
	StatusDeadLettered = "dead_lettered"
	// StatusFiltered: it was not sent to this destination: dropped before it (class
	// "filtered"), or for its suppressed or deleted user.
	StatusFiltered = "filtered"
)

// MessageStatuses are the values of Message.Status, and of a ?status= filter of the messages.
var MessageStatuses = []string{StatusDelivered, StatusRetrying, StatusDeadLettered, StatusFiltered}

// filteredClass is the class of an attempt record written for a message dropped before the
// destination.
const filteredClass = "filtered"

// unsent reports whether a record of this class was not sent at all: the message is filtered.
func unsent(class string) bool {
	return class == filteredClass || class == string(schemas.ClassSuppressed) || class == string(schemas.ClassDeleted)
}

// MessageAttempt is one POST of a Message (or its record dropped unsent).
type MessageAttempt struct {
	URL             string            `json:"url"`
	At              time.Time         `json:"at"`
	Attempt         int               `json:"attempt"`
	Status          int               `json:"status"`
	Class           string            `json:"class"`
	LatencyMs       float64           `json:"latencyMs"`
	Error           string            `json:"error,omitempty"`
	ResponseHeaders map[string]string `json:"responseHeaders"`
	ResponseBody    string            `json:"responseBody"`
}

// Message is one message's delivery to one destination, as GET
// /v1/destinations/{id}/messages answers it.
type Message struct {
	// Seq orders the messages (the newest has the highest): the cursor of a page.
	Seq            uint64           `json:"-"`
	MessageID      string           `json:"messageId"`
	DestinationID  string           `json:"destinationId"`
	Type           string           `json:"type"`
	Event          string           `json:"event"`
	UserID         string           `json:"userId"`
	AnonymousID    string           `json:"anonymousId"`
	Status         string           `json:"status"`
	DeadLettered   string           `json:"deadLetterReason,omitempty"`
	ReceivedAt     *time.Time       `json:"receivedAt"`
	FirstAttemptAt time.Time        `json:"firstAttemptAt"`
	LastAttemptAt  time.Time        `json:"lastAttemptAt"`
	NextAttemptAt  *time.Time       `json:"nextAttemptAt"`
	Attempts       []MessageAttempt `json:"attempts"`
	// AttemptsDropped is how many of its oldest attempts the view no longer holds
	// (MaxMessageAttempts).
	AttemptsDropped int `json:"attemptsDropped,omitempty"`
}

// MaxMessageAttempts is how many attempts the view keeps per message: the newest.
const MaxMessageAttempts = 32

// attemptOverhead is what the view counts for one kept attempt besides its answer's bytes.
const attemptOverhead = 160

// The layout is for the garbage collector
// (docs/benchmarks.md#the-views-and-the-garbage-collector): a destination's messages are
// values in a slab of chunks (grown with the messages, up to perDest), found by slot number;
// the id and index maps are keyed by a hash of their value and hold slot numbers (an id's
// hash leads to a chain of the messages of that hash, compared by id; an index list may hold
// another key of the same hash, which a query's match leaves out); links between messages
// are slot numbers, and times unix nanoseconds (0: none). What the collector follows is the
// messages' strings and the answers kept, not a pointer per message, attempt and index entry.

// keptAttempt is an attempt as the view keeps it (MessageAttempt built on demand).
type keptAttempt struct {
	url, class, err, body string
	headers               map[string]string
	at                    int64 // unix ns
	latencyMs             float64
	attempt, status       int32
}

// size is what the attempt counts toward the budget.
func (a *keptAttempt) size() int {
	size := attemptOverhead + len(a.body) + len(a.err)
	for k, val := range a.headers {
		size += len(k) + len(val) + 32
	}
	return size
}

func (a *keptAttempt) export() MessageAttempt {
	return MessageAttempt{URL: a.url, At: fromNanos(a.at), Attempt: int(a.attempt), Status: int(a.status), Class: a.class,
		LatencyMs: a.latencyMs, Error: a.err, ResponseHeaders: a.headers, ResponseBody: a.body}
}

// message is one kept message: a value in its destination's slab; its fields are guarded by
// the view's lock.
type message struct {
	seq                                   uint64 // Message.Seq; 0: a free slot
	id, typ, event, userID, anonymousID   string
	receivedAt, firstAt, lastAt, lastNext int64 // unix ns, 0 when unknown
	// What the latest record says (its outcome decides the status): dead-lettered with this
	// reason, due on a retry tier then (lastNext), dropped unsent.
	lastDead string
	// dlq is its newest dead letter the DLQ's reader told of (DeadLettered): the DLQ decides
	// the status when no attempt came after it (a dead letter written without an attempt:
	// its retry window ended while it waited, its destination was disabled...).
	dlq deadMark
	// Its attempts, oldest first: the first, then more (most messages have one).
	first           keptAttempt
	more            []keptAttempt
	attempts        int32 // how many: first and more
	attemptsDropped int32
	bytes           int // what its attempts count toward the budget
	// idNext is the next message whose id has the same hash (destMessages.byID); links its
	// neighbours in each index's list, by Seq.
	idNext  int32
	links   [indexCount]struct{ older, newer int32 }
	lastUns bool
	ok      bool // a URL answered 2xx
}

// attempt is the i-th oldest attempt kept.
func (m *message) attempt(i int) *keptAttempt {
	if i == 0 {
		return &m.first
	}
	return &m.more[i-1]
}

// push adds a as the newest attempt.
func (m *message) push(a keptAttempt) {
	if m.attempts == 0 {
		m.first = a
	} else {
		m.more = append(m.more, a)
	}
	m.attempts++
}

// dropOldest drops the oldest attempt.
func (m *message) dropOldest() {
	switch m.attempts {
	case 0:
		return
	case 1:
		m.first = keptAttempt{}
	default:
		m.first = m.more[0]
		n := copy(m.more, m.more[1:])
		m.more[n] = keptAttempt{}
		m.more = m.more[:n]
	}
	m.attempts--
}

// deadMark is a dead letter of a message: its reason and when it was written (unix ns).
type deadMark struct {
	reason string
	at     int64
}

// nanos is t in unix nanoseconds, 0 for the zero time; a time beyond what they count (before
// 1678, after 2261) is taken at that bound.
func nanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.Before(minNanos):
		return math.MinInt64
	case t.After(maxNanos):
		return math.MaxInt64
	}
	return t.UnixNano()
}

var (
	minNanos = time.Unix(0, math.MinInt64)
	maxNanos = time.Unix(0, math.MaxInt64)
)

// fromNanos is the UTC time of unix nanoseconds n, the zero time for 0.
func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// msgKey is a message of a destination.
type msgKey struct{ dest, id string }

// maxDeadMarks bounds the dead letters the view keeps for messages it has not seen yet (the
// DLQ's reader may read them before the attempts' reader reads their attempts).
const maxDeadMarks = 100_000

// Index keys of a destination's messages.
const (
	byUser = iota
	byAnonymous
	indexCount
)

// indexList is the messages of one index key (of its hash: two keys of one hash share a list,
// and a query checks the key), linked through the messages by Seq.
type indexList struct{ oldest, newest, n int32 }

// messageChunkShift: a destination's slab allocates 1<<messageChunkShift (256) messages at once.
const messageChunkShift = 8

// destMessages is one destination's messages: in a slab, oldest first, by id, and indexed.
type destMessages struct {
	id    string
	slots slab[message]
	order []int32          // by Seq, oldest first
	byID  map[uint64]int32 // the hash of an id: the first message of a chain through idNext
	index [indexCount]map[uint64]indexList
	bytes int
}

func (d *destMessages) at(slot int32) *message { return d.slots.at(slot) }

// Messages is every destination's messages. Safe for concurrent use.
type Messages struct {
	mu         sync.RWMutex
	perDest    int
	bodyBudget int
	dests      map[string]*destMessages
	seq        uint64
	seed       maphash.Seed
	// dead are dead letters of messages not seen yet, taken when their first attempt is.
	dead map[msgKey]deadMark
}

// NewMessages is an empty view keeping perDest messages per destination, and at most
// bodyBudget bytes of their attempts (answers included) per destination.
func NewMessages(perDest, bodyBudget int) *Messages {
	return &Messages{perDest: max(perDest, 1), bodyBudget: max(bodyBudget, 1), dests: map[string]*destMessages{},
		seed: maphash.MakeSeed(), dead: map[msgKey]deadMark{}}
}

func (v *Messages) hash(s string) uint64 { return maphash.String(v.seed, s) }

// find is the slot of message id at d, noSlot when d holds none.
func (v *Messages) find(d *destMessages, id string) int32 {
	slot, ok := d.byID[v.hash(id)]
	for ok && slot != noSlot {
		if m := d.at(slot); m.id == id {
			return slot
		} else {
			slot = m.idNext
		}
	}
	return noSlot
}

// DeadLettered records that the deliverer dead-lettered the message id of dest at at, for
// reason (a webhooks.dlq record): the message is dead_lettered until an attempt comes after it
// (a replay).
func (v *Messages) DeadLettered(dest, id, reason string, at time.Time) {
	if dest == "" || id == "" {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	mark := deadMark{reason: reason, at: nanos(at)}
	if d := v.dests[dest]; d != nil {
		if slot := v.find(d, id); slot != noSlot {
			if m := d.at(slot); mark.at >= m.dlq.at {
				m.dlq = mark
			}
			return
		}
	}
	k := msgKey{dest, id}
	if old, ok := v.dead[k]; ok && mark.at < old.at {
		return
	}
	if len(v.dead) >= maxDeadMarks {
		clear(v.dead)
	}
	v.dead[k] = mark
}

// Add records attempts read (test deliveries and records without a message id are not
// messages), but those forgotten reports (a forgotten message's, or a forgotten user's); it
// returns how many it skipped so.
func (v *Messages) Add(batch []DeliveryAttempt, forgotten func(a *DeliveryAttempt) bool) (skipped int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for i := range batch {
		a := &batch[i]
		if a.Test || a.MessageID == "" || a.DestinationID == "" {
			continue
		}
		if forgotten != nil && forgotten(a) {
			skipped++
			continue
		}
		v.add(a)
	}
	return skipped
}

// add records one attempt; called with mu held.
func (v *Messages) add(a *DeliveryAttempt) {
	d := v.dests[a.DestinationID]
	if d == nil {
		d = &destMessages{id: a.DestinationID, slots: newSlab[message](messageChunkShift), byID: map[uint64]int32{}}
		for i := range d.index {
			d.index[i] = map[uint64]indexList{}
		}
		v.dests[a.DestinationID] = d
	}
	at := nanos(a.At)
	slot := v.find(d, a.MessageID)
	if slot == noSlot {
		v.seq++
		slot = d.slots.alloc()
		h := v.hash(a.MessageID)
		next, ok := d.byID[h]
		if !ok {
			next = noSlot
		}
		*d.at(slot) = message{seq: v.seq, id: a.MessageID, firstAt: at, idNext: next}
		for i := range d.at(slot).links {
			d.at(slot).links[i].older, d.at(slot).links[i].newer = noSlot, noSlot
		}
		d.byID[h] = slot
		d.order = append(d.order, slot)
		if dm, ok := v.dead[msgKey{a.DestinationID, a.MessageID}]; ok {
			d.at(slot).dlq = dm
			delete(v.dead, msgKey{a.DestinationID, a.MessageID})
		}
	}
	m := d.at(slot)
	v.learn(d, slot, a)
	att := keptAttempt{url: a.URL, at: at, attempt: int32(min(a.Attempt, math.MaxInt32)), status: int32(min(a.Status, math.MaxInt32)),
		class: a.ErrorClass, latencyMs: a.LatencyMs, err: a.Error, headers: a.ResponseHeaders, body: a.ResponseBody}
	size := att.size()
	if m.attempts == MaxMessageAttempts {
		old := m.first.size()
		m.bytes -= old
		d.bytes -= old
		m.dropOldest()
		m.attemptsDropped++
	}
	m.push(att)
	m.bytes += size
	d.bytes += size
	if at < m.firstAt {
		m.firstAt = at
	}
	if m.lastAt == 0 || at >= m.lastAt {
		m.lastAt = at
		m.lastDead, m.lastNext, m.lastUns = a.DeadLettered, nanos(a.NextAttemptAt), unsent(a.ErrorClass)
	}
	if a.ErrorClass == SuccessClass {
		m.ok = true
	}
	// Bounded: the oldest messages go first (never the one just added).
	for len(d.order) > 1 && (len(d.order) > v.perDest || d.bytes > v.bodyBudget) {
		v.evict(d, d.order[0])
	}
}

// learn takes what a record says of the message of slot that the message does not know yet (a
// record of an older deliverer says nothing), indexing it.
func (v *Messages) learn(d *destMessages, slot int32, a *DeliveryAttempt) {
	m := d.at(slot)
	if m.typ == "" {
		m.typ = a.Type
	}
	if m.event == "" {
		m.event = a.Event
	}
	if m.userID == "" && a.UserID != "" {
		m.userID = v.link(d, byUser, slot, a.UserID)
	}
	if m.anonymousID == "" && a.AnonymousID != "" {
		m.anonymousID = v.link(d, byAnonymous, slot, a.AnonymousID)
	}
	if m.receivedAt == 0 {
		m.receivedAt = nanos(a.ReceivedAt)
	}
}

// link adds the message of slot to the list of key in index i, by Seq: at the newest end, but
// for a message that learnt its key late. It returns key, or the same string its newest
// message holds (one string per user, however many of its messages the view keeps).
func (v *Messages) link(d *destMessages, i int, slot int32, key string) string {
	h := v.hash(key)
	list, ok := d.index[i][h]
	m := d.at(slot)
	if !ok || list.n == 0 {
		d.index[i][h] = indexList{oldest: slot, newest: slot, n: 1}
		return key
	}
	if newest := d.at(list.newest); newest.keyOf(i) == key {
		key = newest.keyOf(i)
	}
	// The message it comes after: the newest with a lower Seq.
	after := list.newest
	for after != noSlot && d.at(after).seq > m.seq {
		after = d.at(after).links[i].older
	}
	if after == noSlot {
		m.links[i].older, m.links[i].newer = noSlot, list.oldest
		d.at(list.oldest).links[i].older = slot
		list.oldest = slot
	} else {
		next := d.at(after).links[i].newer
		m.links[i].older, m.links[i].newer = after, next
		d.at(after).links[i].newer = slot
		if next == noSlot {
			list.newest = slot
		} else {
			d.at(next).links[i].older = slot
		}
	}
	list.n++
	d.index[i][h] = list
	return key
}

// unlink takes the message of slot out of the list of its key in index i.
func (v *Messages) unlink(d *destMessages, i int, slot int32) {
	m := d.at(slot)
	key := m.keyOf(i)
	if key == "" {
		return
	}
	h := v.hash(key)
	list := d.index[i][h]
	older, newer := m.links[i].older, m.links[i].newer
	if older != noSlot {
		d.at(older).links[i].newer = newer
	} else {
		list.oldest = newer
	}
	if newer != noSlot {
		d.at(newer).links[i].older = older
	} else {
		list.newest = older
	}
	m.links[i].older, m.links[i].newer = noSlot, noSlot
	if list.n--; list.n <= 0 {
		delete(d.index[i], h)
	} else {
		d.index[i][h] = list
	}
}

// keyOf is m's key in index i.
func (m *message) keyOf(i int) string {
	if i == byUser {
		return m.userID
	}
	return m.anonymousID
}

// evict drops the message of slot from its destination and from every index; called with mu
// held.
func (v *Messages) evict(d *destMessages, slot int32) {
	m := d.at(slot)
	// Out of its id's chain.
	h := v.hash(m.id)
	if head := d.byID[h]; head == slot {
		if m.idNext == noSlot {
			delete(d.byID, h)
		} else {
			d.byID[h] = m.idNext
		}
	} else {
		for s := head; s != noSlot; s = d.at(s).idNext {
			if d.at(s).idNext == slot {
				d.at(s).idNext = m.idNext
				break
			}
		}
	}
	d.bytes -= m.bytes
	if len(d.order) > 0 && d.order[0] == slot {
		d.order = d.order[1:]
	} else {
		d.order = slices.DeleteFunc(d.order, func(x int32) bool { return x == slot })
	}
	for i := range indexCount {
		v.unlink(d, i, slot)
	}
	d.slots.release(slot)
}

// status is m's status by its attempts: delivered once a URL answered 2xx, else dead-lettered
// when its newest dead letter came after its last attempt, else what its latest record says.
func (m *message) status() string {
	switch {
	case m.ok:
		return StatusDelivered
	case m.dlqLast() || m.lastDead != "":
		return StatusDeadLettered
	case m.lastUns:
		return StatusFiltered
	}
	return StatusRetrying
}

// dlqLast reports whether m's newest dead letter came after its last attempt.
func (m *message) dlqLast() bool {
	return m.dlq.at != 0 && m.dlq.at >= m.lastAt
}

// snapshot is m for a caller, of destination dest (its attempts' header maps are shared: never
// written after they were read).
func (m *message) snapshot(dest string) Message {
	out := Message{Seq: m.seq, MessageID: m.id, DestinationID: dest, Type: m.typ, Event: m.event, UserID: m.userID,
		AnonymousID: m.anonymousID, Status: m.status(), FirstAttemptAt: fromNanos(m.firstAt), LastAttemptAt: fromNanos(m.lastAt),
		Attempts: make([]MessageAttempt, m.attempts), AttemptsDropped: int(m.attemptsDropped)}
	for i := range out.Attempts {
		out.Attempts[i] = m.attempt(i).export()
	}
	if m.receivedAt != 0 {
		t := fromNanos(m.receivedAt)
		out.ReceivedAt = &t
	}
	if out.Status == StatusDeadLettered {
		out.DeadLettered = m.lastDead
		if m.dlqLast() {
			out.DeadLettered = m.dlq.reason
		}
	}
	if out.Status == StatusRetrying && m.lastNext != 0 {
		t := fromNanos(m.lastNext)
		out.NextAttemptAt = &t
	}
	return out
}

// MessageQuery selects a destination's messages: each set field must match exactly; Since
// keeps the messages received (else first attempted) at or after it; Before keeps those with
// a Seq under it (the previous page's last: the cursor).
type MessageQuery struct {
	MessageID, UserID, AnonymousID, Event, Type, Status string
	Since                                               time.Time
	Before                                              uint64
}

func (q *MessageQuery) matches(m *message) bool {
	if m.seq >= q.Before ||
		(q.MessageID != "" && m.id != q.MessageID) ||
		(q.UserID != "" && m.userID != q.UserID) ||
		(q.AnonymousID != "" && m.anonymousID != q.AnonymousID) ||
		(q.Event != "" && m.event != q.Event) ||
		(q.Type != "" && m.typ != q.Type) ||
		(q.Status != "" && m.status() != q.Status) {
		return false
	}
	return q.Since.IsZero() || m.since() >= nanos(q.Since)
}

// candidates yields, newest first from the cursor on, a superset of the messages q matches:
// the message of its id, the shortest of its keys' index lists, or every message of the
// destination.
func (v *Messages) candidates(d *destMessages, q *MessageQuery) iter.Seq[*message] {
	return func(yield func(*message) bool) {
		if q.MessageID != "" {
			if slot := v.find(d, q.MessageID); slot != noSlot {
				yield(d.at(slot))
			}
			return
		}
		index, best := -1, indexList{n: int32(min(len(d.order), math.MaxInt32))}
		for i, key := range [indexCount]string{byUser: q.UserID, byAnonymous: q.AnonymousID} {
			if key == "" {
				continue
			}
			list := d.index[i][v.hash(key)]
			if list.n < best.n || list.n == 0 {
				index, best = i, list
			}
			if best.n == 0 {
				return
			}
		}
		if index < 0 {
			// The order is by Seq: from the cursor on.
			end, _ := slices.BinarySearchFunc(d.order, q.Before, func(slot int32, seq uint64) int { return cmp.Compare(d.at(slot).seq, seq) })
			for i := end - 1; i >= 0; i-- {
				if !yield(d.at(d.order[i])) {
					return
				}
			}
			return
		}
		for slot := best.newest; slot != noSlot; {
			m := d.at(slot)
			if m.seq < q.Before && !yield(m) {
				return
			}
			slot = m.links[index].older
		}
	}
}

// Page is the destination's messages that match q, newest first, at most limit; more says
// there are others after them (the next page's Before is the last one's Seq).
func (v *Messages) Page(dest string, q MessageQuery, limit int) (page []Message, more bool) {
	if q.Before == 0 {
		q.Before = ^uint64(0)
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	d := v.dests[dest]
	if d == nil {
		return []Message{}, false
	}
	return Paginate(func(yield func(Message) bool) {
		for m := range v.candidates(d, &q) {
			if q.matches(m) && !yield(m.snapshot(d.id)) {
				return
			}
		}
	}, limit)
}

// Message is every destination's delivery of one message, by destination id.
func (v *Messages) Message(id string) []Message {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var out []Message
	for _, d := range v.dests {
		if slot := v.find(d, id); slot != noSlot {
			out = append(out, d.at(slot).snapshot(d.id))
		}
	}
	slices.SortFunc(out, func(a, b Message) int { return cmp.Compare(a.DestinationID, b.DestinationID) })
	return out
}

// Len is how many messages the view holds for dest, and what they count toward its budget.
func (v *Messages) Len(dest string) (messages, bytes int) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if d := v.dests[dest]; d != nil {
		return len(d.order), d.bytes
	}
	return 0, 0
}

// Forget drops the messages ids (docs/console.md#what-the-console-forgets) from every
// destination, and returns how many it dropped.
func (v *Messages) Forget(ids []string) int {
	n := 0
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, id := range ids {
		for _, d := range v.dests {
			if slot := v.find(d, id); slot != noSlot {
				v.evict(d, slot)
				n++
			}
		}
	}
	return n
}

// ForgetUsers drops the messages hides reports for their user (the userId, else the
// anonymousId) and the time they were received (else first attempted), and returns their ids.
func (v *Messages) ForgetUsers(hides func(user string, at time.Time) bool) []string {
	var ids []string
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, d := range v.dests {
		for _, slot := range slices.Clone(d.order) {
			if m := d.at(slot); hides(m.user(), fromNanos(m.since())) {
				ids = append(ids, m.id)
				v.evict(d, slot)
			}
		}
	}
	return ids
}

// user is whom the message is of: its userId, else its anonymousId ("" when unknown).
func (m *message) user() string {
	if m.userID != "" {
		return m.userID
	}
	return m.anonymousID
}

// since is when the message was received, else first attempted (unix ns).
func (m *message) since() int64 {
	if m.receivedAt != 0 {
		return m.receivedAt
	}
	return m.firstAt
}

// Prune drops the messages of every destination keep returns false for.
func (v *Messages) Prune(keep func(dest string) bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for id := range v.dests {
		if !keep(id) {
			delete(v.dests, id) // its slab and maps with it
		}
	}
}
