package views

import (
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
// keys would cost every record two more index updates). Bounded: a new message beyond perDest, or an answer that takes the
// destination's answers over bodyBudget bytes, drops the destination's oldest messages.

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

// message is one kept message; its fields are guarded by the view's lock.
type message struct {
	Message
	dest *destMessages
	// What the latest record says (its outcome decides the status): dead-lettered with this
	// reason, due on a retry tier then, dropped unsent.
	lastDead string
	lastNext time.Time
	lastUns  bool
	ok       bool // a URL answered 2xx
	bytes    int  // what its attempts count toward the budget
	// dlq is its newest dead letter the DLQ's reader told of (DeadLettered): the DLQ decides
	// the status when no attempt came after it (a dead letter written without an attempt:
	// its retry window ended while it waited, its destination was disabled...).
	dlq deadMark
}

// deadMark is a dead letter of a message: its reason and when it was written.
type deadMark struct {
	reason string
	at     time.Time
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

// destMessages is one destination's messages: oldest first, by id, and indexed.
type destMessages struct {
	order []*message // by Seq, oldest first
	byID  map[string]*message
	index [indexCount]map[string][]*message // each list by Seq, oldest first
	bytes int
}

// Messages is every destination's messages. Safe for concurrent use.
type Messages struct {
	mu         sync.RWMutex
	perDest    int
	bodyBudget int
	dests      map[string]*destMessages
	seq        uint64
	// dead are dead letters of messages not seen yet, taken when their first attempt is.
	dead map[msgKey]deadMark
}

// NewMessages is an empty view keeping perDest messages per destination, and at most
// bodyBudget bytes of their attempts (answers included) per destination.
func NewMessages(perDest, bodyBudget int) *Messages {
	return &Messages{perDest: max(perDest, 1), bodyBudget: max(bodyBudget, 1), dests: map[string]*destMessages{},
		dead: map[msgKey]deadMark{}}
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
	mark := deadMark{reason: reason, at: at}
	if d := v.dests[dest]; d != nil {
		if m := d.byID[id]; m != nil {
			if !at.Before(m.dlq.at) {
				m.dlq = mark
			}
			return
		}
	}
	k := msgKey{dest, id}
	if old, ok := v.dead[k]; ok && at.Before(old.at) {
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
		d = &destMessages{byID: map[string]*message{}}
		for i := range d.index {
			d.index[i] = map[string][]*message{}
		}
		v.dests[a.DestinationID] = d
	}
	m := d.byID[a.MessageID]
	if m == nil {
		v.seq++
		m = &message{dest: d, Message: Message{Seq: v.seq, MessageID: a.MessageID, DestinationID: a.DestinationID, FirstAttemptAt: a.At}}
		d.byID[a.MessageID] = m
		d.order = append(d.order, m)
		if dm, ok := v.dead[msgKey{a.DestinationID, a.MessageID}]; ok {
			m.dlq = dm
			delete(v.dead, msgKey{a.DestinationID, a.MessageID})
		}
	}
	m.learn(a)
	att := MessageAttempt{URL: a.URL, At: a.At, Attempt: a.Attempt, Status: a.Status, Class: a.ErrorClass, LatencyMs: a.LatencyMs,
		Error: a.Error, ResponseHeaders: a.ResponseHeaders, ResponseBody: a.ResponseBody}
	size := attemptSize(&att)
	if len(m.Attempts) == MaxMessageAttempts {
		m.bytes -= attemptSize(&m.Attempts[0])
		d.bytes -= attemptSize(&m.Attempts[0])
		m.Attempts = append(m.Attempts[:0], m.Attempts[1:]...)
		m.AttemptsDropped++
	}
	m.Attempts = append(m.Attempts, att)
	m.bytes += size
	d.bytes += size
	if a.At.Before(m.FirstAttemptAt) {
		m.FirstAttemptAt = a.At
	}
	if !a.At.Before(m.LastAttemptAt) {
		m.LastAttemptAt = a.At
		m.lastDead, m.lastNext, m.lastUns = a.DeadLettered, a.NextAttemptAt, unsent(a.ErrorClass)
	}
	if a.ErrorClass == SuccessClass {
		m.ok = true
	}
	// Bounded: the oldest messages go first (never the one just added).
	for len(d.order) > 1 && (len(d.order) > v.perDest || d.bytes > v.bodyBudget) {
		v.evict(d, d.order[0])
	}
}

// attemptSize is what a kept attempt counts toward the budget (as add counted it).
func attemptSize(a *MessageAttempt) int {
	size := attemptOverhead + len(a.ResponseBody) + len(a.Error)
	for k, val := range a.ResponseHeaders {
		size += len(k) + len(val) + 32
	}
	return size
}

// learn takes what a record says of the message that the message does not know yet (a record
// of an older deliverer says nothing), indexing it.
func (m *message) learn(a *DeliveryAttempt) {
	set := func(field *string, value string, index int) {
		if *field != "" || value == "" {
			return
		}
		*field = value
		if index >= 0 {
			m.dest.index[index][value] = insertBySeq(m.dest.index[index][value], m)
		}
	}
	set(&m.Type, a.Type, -1)
	set(&m.Event, a.Event, -1)
	set(&m.UserID, a.UserID, byUser)
	set(&m.AnonymousID, a.AnonymousID, byAnonymous)
	if m.ReceivedAt == nil && !a.ReceivedAt.IsZero() {
		t := a.ReceivedAt
		m.ReceivedAt = &t
	}
}

// insertBySeq adds m to list, kept by Seq: at the end, but for a message that learnt a key late.
func insertBySeq(list []*message, m *message) []*message {
	if len(list) == 0 || list[len(list)-1].Seq < m.Seq {
		return append(list, m)
	}
	i, _ := slices.BinarySearchFunc(list, m.Seq, func(x *message, seq uint64) int { return cmpSeq(x.Seq, seq) })
	return slices.Insert(list, i, m)
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// keys are m's index keys, by index.
func (m *message) keys() [indexCount]string {
	return [indexCount]string{byUser: m.UserID, byAnonymous: m.AnonymousID}
}

// evict drops m from its destination and from every index; called with mu held.
func (v *Messages) evict(d *destMessages, m *message) {
	delete(d.byID, m.MessageID)
	d.bytes -= m.bytes
	if len(d.order) > 0 && d.order[0] == m {
		d.order[0] = nil
		d.order = d.order[1:]
	} else {
		d.order = slices.DeleteFunc(d.order, func(x *message) bool { return x == m })
	}
	for i, key := range m.keys() {
		if key == "" {
			continue
		}
		list := d.index[i][key]
		if len(list) > 0 && list[0] == m {
			list[0] = nil
			list = list[1:]
		} else {
			list = slices.DeleteFunc(list, func(x *message) bool { return x == m })
		}
		if len(list) == 0 {
			delete(d.index[i], key)
		} else {
			d.index[i][key] = list
		}
	}
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
	return !m.dlq.at.IsZero() && !m.dlq.at.Before(m.LastAttemptAt)
}

// snapshot is a copy of m for a caller (its attempts' header maps are shared: never written
// after they were read).
func (m *message) snapshot() Message {
	out := m.Message
	out.Status = m.status()
	out.Attempts = slices.Clone(m.Attempts)
	if out.ReceivedAt != nil {
		t := *out.ReceivedAt
		out.ReceivedAt = &t
	}
	out.DeadLettered = ""
	if out.Status == StatusDeadLettered {
		out.DeadLettered = m.lastDead
		if m.dlqLast() {
			out.DeadLettered = m.dlq.reason
		}
	}
	if out.Status == StatusRetrying && !m.lastNext.IsZero() {
		t := m.lastNext
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
	if m.Seq >= q.Before ||
		(q.MessageID != "" && m.MessageID != q.MessageID) ||
		(q.UserID != "" && m.UserID != q.UserID) ||
		(q.AnonymousID != "" && m.AnonymousID != q.AnonymousID) ||
		(q.Event != "" && m.Event != q.Event) ||
		(q.Type != "" && m.Type != q.Type) ||
		(q.Status != "" && m.status() != q.Status) {
		return false
	}
	return q.Since.IsZero() || !m.receivedAt().Before(q.Since)
}

// candidates is the shortest list that holds every message q can match: one index's list, or
// every message of the destination.
func (d *destMessages) candidates(q *MessageQuery) []*message {
	if q.MessageID != "" {
		if m := d.byID[q.MessageID]; m != nil {
			return []*message{m}
		}
		return nil
	}
	best := d.order
	for i, key := range [indexCount]string{byUser: q.UserID, byAnonymous: q.AnonymousID} {
		if key == "" {
			continue
		}
		list := d.index[i][key]
		if len(list) < len(best) || len(list) == 0 {
			best = list
		}
		if len(best) == 0 {
			return nil
		}
	}
	return best
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
	list := d.candidates(&q)
	// Newest first, from the cursor on: the lists are by Seq.
	end, _ := slices.BinarySearchFunc(list, q.Before, func(x *message, seq uint64) int { return cmpSeq(x.Seq, seq) })
	return Paginate(func(yield func(Message) bool) {
		for i := end - 1; i >= 0; i-- {
			if m := list[i]; q.matches(m) && !yield(m.snapshot()) {
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
	for _, m := range v.withID(id) {
		out = append(out, m.snapshot())
	}
	slices.SortFunc(out, func(a, b Message) int {
		if a.DestinationID < b.DestinationID {
			return -1
		}
		if a.DestinationID > b.DestinationID {
			return 1
		}
		return 0
	})
	return out
}

// withID is every destination's message id (few destinations: no index across them); called
// with mu held.
func (v *Messages) withID(id string) []*message {
	var ms []*message
	for _, d := range v.dests {
		if m := d.byID[id]; m != nil {
			ms = append(ms, m)
		}
	}
	return ms
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
		for _, m := range v.withID(id) {
			v.evict(m.dest, m)
			n++
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
		for _, m := range slices.Clone(d.order) {
			if hides(m.user(), m.receivedAt()) {
				ids = append(ids, m.MessageID)
				v.evict(d, m)
			}
		}
	}
	return ids
}

// user is whom the message is of: its userId, else its anonymousId ("" when unknown).
func (m *message) user() string {
	if m.UserID != "" {
		return m.UserID
	}
	return m.AnonymousID
}

// receivedAt is when the message was received, else first attempted.
func (m *message) receivedAt() time.Time {
	if m.ReceivedAt != nil {
		return *m.ReceivedAt
	}
	return m.FirstAttemptAt
}

// Prune drops the messages of every destination keep returns false for.
func (v *Messages) Prune(keep func(dest string) bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for id, d := range v.dests {
		if keep(id) {
			continue
		}
		for _, m := range slices.Clone(d.order) {
			v.evict(d, m)
		}
		delete(v.dests, id)
	}
}
