package views

import (
	"cmp"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// Health is what became of each destination's messages (docs/console.md#health): every message
// counted once, by its outcome — delivered (on its first attempt or after retries), retrying,
// dead-lettered, or filtered (dropped before the destination) — in the minute of the last
// thing that happened to it, over the stats window; the end-to-end latency of the delivered
// ones (from their acceptance at ingest to the 2xx); and per URL its attempts, successes and
// failures by class. A message is delivered as soon as one URL answers 2xx
// (docs/delivery.md#outcome-one-function-decides): a URL that keeps failing beside one that
// delivers fails its attempts, not the messages.
//
// It reads the attempt log (webhooks.attempts: the deliverer's POSTs and its records dropped
// unsent, the router's filtered records) and the dead letters (webhooks.dlq). Memory is
// bounded: per destination, per-minute counters over the window (allocated for the minutes
// that have messages) and at most maxURLs URLs; and, across destinations, the state of at most
// maxMessages messages (what they are now, to count a message once and move it when its
// outcome changes), the finished ones (delivered, filtered) forgotten first, least recently
// changed first. A message forgotten early and seen again counts again. The states are laid
// out for the garbage collector (docs/benchmarks.md#the-views-and-the-garbage-collector):
// values in a slab, linked by slot numbers, found by a hash of the message id, counted under
// reasons numbered once: nothing in them or in the maps that find them is a pointer to follow.
// Safe for concurrent use.
type Health struct {
	mu          sync.RWMutex
	window      time.Duration
	maxMessages int
	dests       map[string]*destHealth
	// byNum is the destinations by number (nil: a number free again, in freeNums): a state
	// names its destination so.
	byNum    []*destHealth
	freeNums []int32
	seeds    [2]maphash.Seed // of stateKey
	reasons  reasons
	// states holds the message states; open links those of messages that may still change
	// (retrying, dead-lettered), done those of the finished ones, least recently changed
	// first: done is forgotten first.
	states     slab[msgState]
	open, done msgList
}

// HealthEvent is one record the health view reads: an attempt record, or a dead letter.
type HealthEvent struct {
	DestinationID, MessageID string
	// At is when the attempt ended, the router routed a filtered message, or the message was
	// dead-lettered.
	At time.Time
	// URL, Attempt, Class and Error are the attempt record's (URL empty on a record not sent);
	// Class "filtered" is a message the router dropped for the destination, Reason why, and
	// Filter the destination filter that did on the reason destination_filter ("" on a record
	// that names none: an older router's).
	URL     string
	Attempt int
	Class   string
	Error   string
	Reason  string
	Filter  string
	// ReceivedAt is when ingest accepted the message, zero when the record does not say: the
	// start of a 2xx's end-to-end latency.
	ReceivedAt time.Time
	// Test: a test delivery's POST, counted nowhere.
	Test bool
	// DeadLettered: a dead letter (webhooks.dlq), Reason its reason.
	DeadLettered bool
}

// Health's bounds.
const (
	// maxURLs is how many URLs a destination's stats keep (the most recently used).
	maxURLs = 16
	// MaxSamples is how many sample message ids the funnel keeps per stage and reason.
	MaxSamples = 10
	// maxSampleKeys bounds a destination's (stage, reason) pairs with samples: room for the
	// drops of each of its filters (dropKey) beside the other reasons.
	maxSampleKeys = 64 + schemas.MaxFilters
)

// End-to-end latency histogram: bucket i holds latencies up to e2eBase·e2eRatio^i ms, from
// 1 ms to about 11 days, within ±13 %.
const (
	e2eBuckets = 80
	e2eBase    = 1.0
	e2eRatio   = 1.3
)

var e2eLogRatio = math.Log(e2eRatio)

func e2eBucket(ms float64) int {
	if ms <= e2eBase {
		return 0
	}
	return min(int(math.Ceil(math.Log(ms/e2eBase)/e2eLogRatio)), e2eBuckets-1)
}

func e2eValue(i int) float64 {
	if i == 0 {
		return e2eBase
	}
	return e2eBase * math.Pow(e2eRatio, float64(i)-0.5)
}

// stage is where a message is.
type stage uint8

const (
	stageDropped stage = iota + 1
	stageDeliveredFirst
	stageDeliveredRetried
	stageRetrying
	stageDeadLettered
)

func (s stage) delivered() bool { return s == stageDeliveredFirst || s == stageDeliveredRetried }

// finished: the message will not change any more (delivered, dropped).
func (s stage) finished() bool { return s.delivered() || s == stageDropped }

// counterKey is a counter's key: the stage (the top 8 bits), and the reason (a filter reason,
// the last failure's class, the dead letter's reason; "" for the delivered) as its number in
// the view's reasons. A message a destination filter dropped has the reason dropKey:
// destination_filter and the filter's name, apart per filter (the funnel splits them again:
// splitDropKey).
type counterKey uint32

const reasonBits = 24

func (k counterKey) stage() stage            { return stage(k >> reasonBits) }
func (k counterKey) reason() uint32          { return uint32(k) & (1<<reasonBits - 1) }
func counterOf(s stage, r uint32) counterKey { return counterKey(uint32(s)<<reasonBits | r) }

// reasons numbers the reasons of the counters: a few per destination (the classes, the filter
// reasons, the dead letters' reasons, one per destination filter), so that a counter's key
// holds no string.
type reasons struct {
	ids   map[string]uint32
	names []string
}

// maxReasons bounds the reasons a view numbers; the reasons of records beyond it (of a
// deliverer or router sending ever new ones) count as otherClass.
const maxReasons = 1 << 16

// id is reason's number.
func (r *reasons) id(reason string) uint32 {
	if id, ok := r.ids[reason]; ok {
		return id
	}
	if len(r.names) >= maxReasons {
		reason = otherClass
		if id, ok := r.ids[reason]; ok {
			return id
		}
	}
	if r.ids == nil {
		r.ids = map[string]uint32{}
	}
	id := uint32(len(r.names))
	r.ids[reason] = id
	r.names = append(r.names, reason)
	return id
}

// counter is one counter of a minute.
type counter struct {
	key counterKey
	n   int32
}

// healthMinute is a destination's counters of one minute.
type healthMinute struct {
	at     int64 // unix minute
	set    bool  // at is a minute the slot holds (else it never held one)
	counts []counter
	e2e    *[e2eBuckets]uint32 // end-to-end latencies of the messages delivered this minute
}

// urlMinute is one URL's counters of one minute.
type urlMinute struct {
	at                  int64
	attempts, successes uint32
	failures            [schemas.ErrorClassCount]uint32 // by FailureClasses
}

// urlLog is one URL's counters and last error.
type urlLog struct {
	minutes     []*urlMinute
	lastSeen    int64 // unix minute
	lastError   string
	lastErrorAt time.Time
}

// stateKey is what the view knows a message by: a 128-bit hash of its id, seeded per view (two
// of the 100,000 messages it keeps share one with a chance of about 1 in 10^28), so that a
// state and the map that finds it hold no pointer for the garbage collector to follow.
type stateKey [2]uint64

// noSlot is no state: the end of a list.
const noSlot = -1

// msgState is what a message is now, and where it is counted: a value in the view's slab of
// states, linked by slot numbers (no pointer).
type msgState struct {
	key    stateKey
	at     int64 // unix ms of the latest event applied
	minute int64 // the minute it is counted in
	// attempt is the highest attempt number seen; deadLettered: it was dead-lettered once.
	attempt      int32
	dest         int32      // its destination's number (Health.byNum)
	counted      counterKey // its stage and reason
	prev, next   int32      // its neighbours in its list (noSlot at an end)
	in           listID     // that list
	deadLettered bool
}

func (st *msgState) stage() stage { return st.counted.stage() }

// listID names a list of states.
type listID uint8

const (
	inNone listID = iota
	inOpen
	inDone
)

// stateChunkShift: the slab allocates 1<<stateChunkShift (4,096) states at once: it grows with
// the messages seen, up to the view's bound, without copying what it holds.
const stateChunkShift = 12

// sample is a message id of the funnel, with when it got there.
type sample struct {
	id string
	at int64 // unix ms
}

// destHealth is one destination's part of the view.
type destHealth struct {
	id      string
	num     int32          // its number: msgState.dest
	minutes []healthMinute // by unix minute modulo len
	msgs    map[stateKey]int32
	urls    map[string]*urlLog
	samples map[counterKey]*Ring[sample]
}

// NewHealth is an empty view counting over window, keeping the state of at most maxMessages
// messages (at least 1).
func NewHealth(window time.Duration, maxMessages int) *Health {
	return &Health{window: window, maxMessages: max(maxMessages, 1), dests: map[string]*destHealth{},
		seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}, states: newSlab[msgState](stateChunkShift),
		open: msgList{head: noSlot, tail: noSlot}, done: msgList{head: noSlot, tail: noSlot}}
}

func (h *Health) minutes() int { return max(int(h.window/time.Minute), 1) }

func (h *Health) dest(id string) *destHealth {
	d := h.dests[id]
	if d == nil {
		d = &destHealth{id: id, minutes: make([]healthMinute, h.minutes()), msgs: map[stateKey]int32{},
			urls: map[string]*urlLog{}, samples: map[counterKey]*Ring[sample]{}}
		if n := len(h.freeNums); n > 0 {
			d.num = h.freeNums[n-1]
			h.freeNums = h.freeNums[:n-1]
			h.byNum[d.num] = d
		} else {
			d.num = int32(len(h.byNum))
			h.byNum = append(h.byNum, d)
		}
		h.dests[id] = d
	}
	return d
}

// keyOf is the state key of message id.
func (h *Health) keyOf(id string) stateKey {
	return stateKey{maphash.String(h.seeds[0], id), maphash.String(h.seeds[1], id)}
}

// stateOf is the state of the message of key at d, nil when the view holds none.
func (h *Health) stateOf(d *destHealth, key stateKey) *msgState {
	if slot, ok := d.msgs[key]; ok {
		return h.states.at(slot)
	}
	return nil
}

// Add counts events, but those of a message forgotten reports (checked under the view's lock,
// as Attempts.Add does); it returns how many it skipped so.
func (h *Health) Add(batch []HealthEvent, forgotten func(messageID string) bool) (skipped int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range batch {
		e := &batch[i]
		if e.MessageID != "" && forgotten != nil && forgotten(e.MessageID) {
			skipped++
			continue
		}
		h.add(e)
	}
	return skipped
}

// add counts one event; called with mu held.
func (h *Health) add(e *HealthEvent) {
	if e.Test || e.DestinationID == "" {
		return
	}
	d := h.dest(e.DestinationID)
	switch {
	case e.DeadLettered:
		h.move(d, e, stageDeadLettered, e.Reason)
	case e.Class == FilteredClass:
		// The router writes one per message and destination: counted as it comes.
		unix := minuteOf(e.At)
		key := counterOf(stageDropped, h.reasons.id(dropKey(e.Reason, e.Filter)))
		d.count(unix, key, 1)
		d.sample(key, e.MessageID, e.At.UnixMilli())
	case e.Class == string(schemas.ClassSuppressed) || e.Class == string(schemas.ClassDeleted):
		h.move(d, e, stageDropped, e.Class) // dropped unsent by the deliverer
	case e.Class == SuccessClass:
		d.countURL(e)
		if h.move(d, e, stageDeliveredFirst, "") && !e.ReceivedAt.IsZero() {
			ms := max(float64(e.At.Sub(e.ReceivedAt).Microseconds())/1000, 0)
			if m := d.minute(minuteOf(e.At), true); m != nil {
				if m.e2e == nil {
					m.e2e = new([e2eBuckets]uint32)
				}
				m.e2e[e2eBucket(ms)]++
			}
		}
	default:
		d.countURL(e)
		h.move(d, e, stageRetrying, e.Class)
	}
}

// filterKeyPrefix starts the reason key of a message a named destination filter dropped.
const filterKeyPrefix = string(schemas.FilterDestinationFilter) + ":"

// dropKey is the reason key of a filtered record: its reason, and for a destination filter's
// drop that names the filter, "destination_filter:<filter>".
func dropKey(reason, filter string) string {
	if filter == "" || reason != string(schemas.FilterDestinationFilter) {
		return reason
	}
	return filterKeyPrefix + filter
}

// splitDropKey is the reason and the filter of a key of dropKey.
func splitDropKey(key string) (reason, filter string) {
	if f, ok := strings.CutPrefix(key, filterKeyPrefix); ok {
		return string(schemas.FilterDestinationFilter), f
	}
	return key, ""
}

func minuteOf(t time.Time) int64 { return int64(math.Floor(float64(t.Unix()) / 60)) }

// move puts the event's message in stage to (with reason), counted in the event's minute,
// unless it was delivered already (a message is delivered once) or the event is older than
// what the view knows of it (the attempts and the dead letters are read apart); a 2xx always
// delivers it: on its first attempt (stageDeliveredFirst) when it is attempt 1 and no earlier
// attempt failed (another URL's failure of the same attempt does not count) nor was it
// dead-lettered (a replay starts again at attempt 1), else after retries. It reports whether
// the message moved.
func (h *Health) move(d *destHealth, e *HealthEvent, to stage, reason string) bool {
	ms, unix := e.At.UnixMilli(), minuteOf(e.At)
	if e.MessageID == "" { // nothing to know it again by: counted as it comes
		if to == stageDeliveredFirst && e.Attempt > 1 {
			to = stageDeliveredRetried
		}
		d.count(unix, counterOf(to, h.reasons.id(reason)), 1)
		return true
	}
	id := h.keyOf(e.MessageID)
	slot, known := d.msgs[id]
	var st *msgState
	if known {
		st = h.states.at(slot)
		if st.stage().delivered() || (!to.delivered() && ms < st.at) {
			return false
		}
		d.count(st.minute, st.counted, -1)
	} else {
		slot = h.states.alloc()
		st = h.states.at(slot)
		*st = msgState{key: id, dest: d.num, prev: noSlot, next: noSlot}
		d.msgs[id] = slot
	}
	if to == stageDeliveredFirst && (e.Attempt > 1 || st.attempt > 1 || st.deadLettered) {
		to = stageDeliveredRetried
	}
	key := counterOf(to, h.reasons.id(reason))
	st.counted, st.minute, st.at = key, unix, max(st.at, ms)
	st.attempt = max(st.attempt, int32(min(e.Attempt, math.MaxInt32)))
	st.deadLettered = st.deadLettered || to == stageDeadLettered
	d.count(unix, key, 1)
	if !to.delivered() {
		d.sample(key, e.MessageID, ms)
	}
	// Least recently changed first, the finished apart: they are forgotten first.
	l := inOpen
	if to.finished() {
		l = inDone
	}
	h.unlink(slot)
	h.pushBack(l, slot)
	for h.open.n+h.done.n > h.maxMessages {
		oldest := h.done.head
		if oldest == noSlot {
			oldest = h.open.head
		}
		h.forgetState(oldest)
	}
	return true
}

// forgetState drops a message's state (its counters stay); called with mu held.
func (h *Health) forgetState(slot int32) {
	h.unlink(slot)
	st := h.states.at(slot)
	delete(h.byNum[st.dest].msgs, st.key)
	h.states.release(slot)
}

// msgList is a list of message states, least recently changed first, linked through the
// states themselves by slot number.
type msgList struct {
	head, tail int32
	n          int
}

func (h *Health) list(l listID) *msgList {
	if l == inOpen {
		return &h.open
	}
	return &h.done
}

// pushBack links the state of slot, in no list, at the end of list l.
func (h *Health) pushBack(l listID, slot int32) {
	ls, st := h.list(l), h.states.at(slot)
	st.in, st.prev, st.next = l, ls.tail, noSlot
	if ls.tail != noSlot {
		h.states.at(ls.tail).next = slot
	} else {
		ls.head = slot
	}
	ls.tail = slot
	ls.n++
}

// unlink takes the state of slot out of its list, if it is in one.
func (h *Health) unlink(slot int32) {
	st := h.states.at(slot)
	if st.in == inNone {
		return
	}
	ls := h.list(st.in)
	if st.prev != noSlot {
		h.states.at(st.prev).next = st.next
	} else {
		ls.head = st.next
	}
	if st.next != noSlot {
		h.states.at(st.next).prev = st.prev
	} else {
		ls.tail = st.prev
	}
	st.in, st.prev, st.next = inNone, noSlot, noSlot
	ls.n--
}

// minute is the destination's counters of unix minute, nil when its slot holds a later
// minute (older than the window kept) or, unless create, another one.
func (d *destHealth) minute(unix int64, create bool) *healthMinute {
	slot := int(((unix % int64(len(d.minutes))) + int64(len(d.minutes))) % int64(len(d.minutes)))
	m := &d.minutes[slot]
	if m.set && m.at == unix {
		return m
	}
	if !create || (m.set && m.at > unix) {
		return nil
	}
	m.at, m.set, m.counts = unix, true, m.counts[:0]
	if m.e2e != nil {
		clear(m.e2e[:])
	}
	return m
}

// count adds delta to a counter of unix minute; a decrement of a minute no longer kept does
// nothing.
func (d *destHealth) count(unix int64, key counterKey, delta int32) {
	m := d.minute(unix, delta > 0)
	if m == nil {
		return
	}
	for i := range m.counts {
		if c := &m.counts[i]; c.key == key {
			if c.n += delta; c.n <= 0 {
				last := len(m.counts) - 1
				m.counts[i] = m.counts[last]
				m.counts = m.counts[:last]
			}
			return
		}
	}
	if delta > 0 {
		m.counts = append(m.counts, counter{key: key, n: delta})
	}
}

// sample remembers id as one of the last messages of a stage and reason.
func (d *destHealth) sample(key counterKey, id string, at int64) {
	if id == "" {
		return
	}
	r := d.samples[key]
	if r == nil {
		if len(d.samples) >= maxSampleKeys {
			return
		}
		r = NewRing[sample](MaxSamples, nil)
		d.samples[key] = r
	}
	for s := range r.Newest() {
		if s.id == id {
			s.at = max(s.at, at)
			return
		}
	}
	r.Push(sample{id: id, at: at})
}

// countURL counts one POST of a URL.
func (d *destHealth) countURL(e *HealthEvent) {
	if e.URL == "" {
		return
	}
	unix := minuteOf(e.At)
	u := d.urls[e.URL]
	if u == nil {
		if len(d.urls) >= maxURLs { // the least recently used goes
			var oldest string
			for k, v := range d.urls {
				if oldest == "" || v.lastSeen < d.urls[oldest].lastSeen {
					oldest = k
				}
			}
			delete(d.urls, oldest)
		}
		u = &urlLog{minutes: make([]*urlMinute, len(d.minutes))}
		d.urls[e.URL] = u
	}
	u.lastSeen = max(u.lastSeen, unix)
	if e.Class != SuccessClass && !e.At.Before(u.lastErrorAt) {
		u.lastError, u.lastErrorAt = e.Error, e.At
		if u.lastError == "" {
			u.lastError = e.Class
		}
	}
	slot := int(((unix % int64(len(u.minutes))) + int64(len(u.minutes))) % int64(len(u.minutes)))
	m := u.minutes[slot]
	if m == nil {
		m = &urlMinute{at: unix}
		u.minutes[slot] = m
	}
	if m.at != unix {
		if m.at > unix {
			return
		}
		*m = urlMinute{at: unix}
	}
	m.attempts++
	if e.Class == SuccessClass {
		m.successes++
	} else {
		m.failures[classIndex(e.Class)]++
	}
}

// Forget drops what the view holds of messages ids (their states and samples; the counters
// stay: they hold no message) and returns how many states it dropped.
func (h *Health) Forget(ids []string) int {
	if len(ids) == 0 {
		return 0
	}
	gone := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		gone[id] = struct{}{}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	keys := make([]stateKey, 0, len(gone))
	for id := range gone {
		keys = append(keys, h.keyOf(id))
	}
	n := 0
	for _, d := range h.dests {
		for _, key := range keys {
			if slot, ok := d.msgs[key]; ok {
				h.forgetState(slot)
				n++
			}
		}
		for _, r := range d.samples {
			r.Remove(func(s *sample) bool { _, ok := gone[s.id]; return ok })
		}
	}
	return n
}

// Prune drops everything of the destinations keep returns false for.
func (h *Health) Prune(keep func(dest string) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, d := range h.dests {
		if keep(id) {
			continue
		}
		for _, slot := range d.msgs {
			h.forgetState(slot)
		}
		delete(h.dests, id)
		h.byNum[d.num] = nil
		h.freeNums = append(h.freeNums, d.num)
	}
}

// MessageCounts are a destination's messages by outcome.
type MessageCounts struct {
	Delivered    uint64 `json:"delivered"`
	Retrying     uint64 `json:"retrying"`
	DeadLettered uint64 `json:"deadLettered"`
	Filtered     uint64 `json:"filtered"`
}

// EndToEnd is the end-to-end latency's percentiles, nil without a delivered message whose
// acceptance time is known.
type EndToEnd struct {
	P50 *float64 `json:"p50"`
	P95 *float64 `json:"p95"`
	P99 *float64 `json:"p99"`
}

// URLStats are one URL's attempts over a window.
type URLStats struct {
	URL       string            `json:"url"`
	Attempts  uint64            `json:"attempts"`
	Successes uint64            `json:"successes"`
	Failures  map[string]uint64 `json:"failures"`
	// LastError is the URL's last failure ("<class>: <detail>"), whenever it was; LastErrorAt
	// when.
	LastError   string     `json:"lastError,omitempty"`
	LastErrorAt *time.Time `json:"lastErrorAt,omitempty"`
}

// HealthStats are a destination's messages over a window: what GET
// /v1/destinations/{id}/stats adds to the attempts' counters.
type HealthStats struct {
	Messages MessageCounts `json:"messages"`
	// DeliveryRate is delivered ÷ (delivered + dead-lettered), nil when both are 0.
	DeliveryRate *float64 `json:"deliveryRate"`
	// EndToEndMs is the latency from the message's acceptance at ingest to the 2xx, retries
	// included.
	EndToEndMs EndToEnd `json:"endToEndLatencyMs"`
	// URLs are the destination's URLs with attempts in the window, by URL.
	URLs []URLStats `json:"urls"`
	// DeliveredFirstAttempt and DeliveredAfterRetries split Messages.Delivered (the funnel).
	DeliveredFirstAttempt uint64 `json:"-"`
	DeliveredAfterRetries uint64 `json:"-"`
}

// span is the minutes [first, last] of the window ending at now, at most the view's.
func (h *Health) span(now time.Time, window time.Duration) (first, last int64) {
	window = min(window, h.window)
	last = minuteOf(now)
	return last - int64(max(window/time.Minute, 1)) + 1, last
}

// each calls f with the destination's counters of every minute of [first, last].
func (d *destHealth) each(first, last int64, f func(m *healthMinute)) {
	if d == nil {
		return
	}
	for u := first; u <= last; u++ {
		if m := d.minute(u, false); m != nil {
			f(m)
		}
	}
}

// Stats are the destination's messages over the window before now.
func (h *Health) Stats(id string, now time.Time, window time.Duration) HealthStats {
	first, last := h.span(now, window)
	out := HealthStats{URLs: []URLStats{}}
	var hist [e2eBuckets]uint64
	var n uint64
	h.mu.RLock()
	d := h.dests[id]
	d.each(first, last, func(m *healthMinute) {
		for _, c := range m.counts {
			switch n := uint64(c.n); c.key.stage() {
			case stageDeliveredFirst:
				out.DeliveredFirstAttempt += n
			case stageDeliveredRetried:
				out.DeliveredAfterRetries += n
			case stageRetrying:
				out.Messages.Retrying += n
			case stageDeadLettered:
				out.Messages.DeadLettered += n
			case stageDropped:
				out.Messages.Filtered += n
			}
		}
		if m.e2e != nil {
			for i, c := range m.e2e {
				hist[i] += uint64(c)
				n += uint64(c)
			}
		}
	})
	if d != nil {
		for url, u := range d.urls {
			s := URLStats{URL: url, Failures: map[string]uint64{}, LastError: u.lastError}
			for _, m := range u.minutes {
				if m == nil || m.at < first || m.at > last {
					continue
				}
				s.Attempts += uint64(m.attempts)
				s.Successes += uint64(m.successes)
				for i, c := range m.failures {
					if c > 0 {
						s.Failures[FailureClasses[i]] += uint64(c)
					}
				}
			}
			if s.Attempts == 0 {
				continue
			}
			if !u.lastErrorAt.IsZero() {
				at := u.lastErrorAt.UTC()
				s.LastErrorAt = &at
			}
			out.URLs = append(out.URLs, s)
		}
	}
	h.mu.RUnlock()
	slices.SortFunc(out.URLs, func(a, b URLStats) int { return cmp.Compare(a.URL, b.URL) })
	out.Messages.Delivered = out.DeliveredFirstAttempt + out.DeliveredAfterRetries
	if total := out.Messages.Delivered + out.Messages.DeadLettered; total > 0 {
		rate := math.Round(float64(out.Messages.Delivered)/float64(total)*10000) / 10000
		out.DeliveryRate = &rate
	}
	out.EndToEndMs = EndToEnd{P50: e2eQuantile(&hist, n, 0.5), P95: e2eQuantile(&hist, n, 0.95), P99: e2eQuantile(&hist, n, 0.99)}
	return out
}

func e2eQuantile(hist *[e2eBuckets]uint64, n uint64, q float64) *float64 {
	if n == 0 {
		return nil
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for i, c := range hist {
		if seen += c; seen >= rank {
			v := math.Round(e2eValue(i)*100) / 100
			return &v
		}
	}
	return nil
}

// FunnelReason is one reason of a funnel stage: how many messages, and the ids of the last
// MaxSamples of them that are still there. The dropped stage has one per destination filter
// that dropped messages: reason destination_filter, Filter its name (and one without a name
// for the records of an older router).
type FunnelReason struct {
	Reason  string   `json:"reason"`
	Filter  string   `json:"filter,omitempty"`
	Count   uint64   `json:"count"`
	Samples []string `json:"sampleMessageIds"`
}

// FunnelStage is one stage of the funnel.
type FunnelStage struct {
	Count   uint64         `json:"count"`
	Reasons []FunnelReason `json:"reasons,omitempty"`
}

// Funnel is what became of a destination's messages over a window (GET
// /v1/destinations/{id}/overview): received from its sources, then each message in one of the
// stages after it. Received is their sum: a message the deliverer has not attempted yet is
// counted once it is.
type Funnel struct {
	Window                string      `json:"window"`
	Received              uint64      `json:"received"`
	Dropped               FunnelStage `json:"dropped"`
	DeliveredFirstAttempt FunnelStage `json:"deliveredFirstAttempt"`
	DeliveredAfterRetries FunnelStage `json:"deliveredAfterRetries"`
	Retrying              FunnelStage `json:"retrying"`
	DeadLettered          FunnelStage `json:"deadLettered"`
}

// Funnel is the destination's funnel over the window before now.
func (h *Health) Funnel(id string, now time.Time, window time.Duration) Funnel {
	first, last := h.span(now, window)
	counts := map[counterKey]uint64{}
	out := Funnel{Window: schemas.ShortDuration(min(window, h.window))}
	h.mu.RLock()
	defer h.mu.RUnlock()
	d := h.dests[id]
	d.each(first, last, func(m *healthMinute) {
		for _, c := range m.counts {
			counts[c.key] += uint64(c.n)
		}
	})
	stages := map[stage]*FunnelStage{stageDropped: &out.Dropped, stageDeliveredFirst: &out.DeliveredFirstAttempt,
		stageDeliveredRetried: &out.DeliveredAfterRetries, stageRetrying: &out.Retrying, stageDeadLettered: &out.DeadLettered}
	from := first * 60_000
	for k, c := range counts {
		st := stages[k.stage()]
		st.Count += c
		out.Received += c
		if k.stage().delivered() {
			continue
		}
		r := FunnelReason{Count: c, Samples: []string{}}
		r.Reason = h.reasons.names[k.reason()]
		if k.stage() == stageDropped {
			r.Reason, r.Filter = splitDropKey(r.Reason)
		}
		if ring := d.samples[k]; ring != nil {
			for s := range ring.Newest() {
				if s.at < from {
					continue
				}
				// Still there: a retrying message since delivered is no sample of retrying.
				if cur := h.stateOf(d, h.keyOf(s.id)); k.stage() != stageDropped && cur != nil && cur.counted != k {
					continue
				}
				r.Samples = append(r.Samples, s.id)
			}
		}
		st.Reasons = append(st.Reasons, r)
	}
	for _, st := range stages {
		slices.SortFunc(st.Reasons, func(a, b FunnelReason) int {
			return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Filter, b.Filter))
		})
	}
	return out
}

// Tracked is how many messages' states the view holds.
func (h *Health) Tracked() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.open.n + h.done.n
}
