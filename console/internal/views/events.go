package views

import (
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// The source debugger: tracking.events (accepted) and tracking.rejected (with the reason), per
// source: the last n of each (a Ring), per-minute counts of the last hour, and the watchers of
// its live stream. An accepted event sealed with its user's data key
// (docs/security.md#crypto-shredding) is kept sealed and opened only when shown: the console
// reads every event, and shows few of them.

// event is one accepted or rejected message of a source.
type event struct {
	seq        uint64
	receivedAt time.Time
	rejected   bool
	typ        string
	messageID  string
	reason     string
	raw        []byte // reused: copy it out under the lock
	key        []byte // the record's key (userId, else anonymousId); reused as raw
	truncated  bool   // raw is the first MaxEventBytes of a larger message
	// sealedWith is the data key raw is sealed with (nil: raw is plain): opened by message,
	// and never once the key is shredded.
	sealedWith *shred.Key
}

// message is the event's message in clear into dst's spare capacity (raw itself when it is
// plain); false when it is sealed with a key shredded since, or does not open.
func (e *event) message(dst []byte) ([]byte, bool) {
	if e.sealedWith == nil {
		return e.raw, true
	}
	if !e.sealedWith.Live() {
		return nil, false
	}
	plain, err := e.sealedWith.Open(dst[:0], e.raw)
	return plain, err == nil
}

// userID is whose the event is: its message's userId, else its anonymousId ("" for neither),
// the user a regulation names (docs/console.md#what-the-console-forgets). An accepted event's
// record is keyed by just that; a rejected message is read for it (its key is the inbound
// record's on the front door), and one that is not a JSON object is its key's.
func (e *event) userID() string {
	if !e.rejected {
		return string(e.key)
	}
	if id, ok := MessageUser(e.raw); ok {
		return string(id)
	}
	return string(e.key)
}

// MessageUser is a message's userId as text, else its anonymousId (nil for neither, or ids that
// are not strings); false when raw is not a JSON object.
func MessageUser(raw []byte) ([]byte, bool) {
	var userID, anonymousID []byte
	if schemas.EachMember(raw, func(key, v []byte) error {
		switch string(key) {
		case "userId":
			userID = v
		case "anonymousId":
			anonymousID = v
		}
		return nil
	}) != nil {
		return nil, false
	}
	if id := jsonText(userID); len(id) > 0 {
		return id, true
	}
	return jsonText(anonymousID), true
}

// scrub empties an event's slot: its bytes are zeroed, not only let go.
func (e *event) scrub() {
	clear(e.raw)
	clear(e.key)
	*e = event{raw: e.raw[:0], key: e.key[:0]}
}

// MaxEventBytes is the most of one message the debugger keeps: Segment's 32 KB limit (a larger
// message is rejected, and shown by its first 32 KB, as text).
const MaxEventBytes = 32 << 10

// maxSlotBytes is the most a slot keeps: a message of MaxEventBytes, sealed.
const maxSlotBytes = MaxEventBytes + shred.Overhead

// EventView is the API's form of an event.
type EventView struct {
	ID         string          `json:"id"`
	ReceivedAt time.Time       `json:"receivedAt"`
	Status     string          `json:"status"` // accepted, rejected
	Type       string          `json:"type,omitempty"`
	MessageID  string          `json:"messageId,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Message    json.RawMessage `json:"message"`
	// Truncated says the message was larger than 32 KB: message is its start, as text.
	Truncated bool `json:"truncated,omitempty"`
}

// StatusForgotten is the status of an event the console forgot (docs/console.md#what-the-console-forgets):
// a live stream sends "event: forgotten" with its id, and the debugger's page removes it.
const StatusForgotten = "forgotten"

// view is the event as the API shows it; false when its message no longer opens (its user was
// deleted: it is not shown).
func (e *event) view() (EventView, bool) {
	v := EventView{ID: strconv.FormatUint(e.seq, 10), ReceivedAt: e.receivedAt, Status: "accepted", Type: e.typ, MessageID: e.messageID, Reason: e.reason, Truncated: e.truncated}
	if e.rejected {
		v.Status = "rejected"
	}
	var msg []byte
	if e.sealedWith != nil {
		var ok bool
		if msg, ok = e.message(make([]byte, 0, len(e.raw))); !ok {
			return EventView{}, false
		}
		v.Message = msg // accepted, hence JSON, and a buffer of its own
		return v, true
	}
	msg = e.raw
	if !e.truncated && json.Valid(msg) {
		v.Message = append(json.RawMessage(nil), msg...)
	} else { // a rejected message that is not JSON: shown as the text it was
		v.Message, _ = json.Marshal(string(msg))
	}
	return v, true
}

// sourceEvents is one source's recent events, watchers and per-minute counts.
type sourceEvents struct {
	ring     *Ring[event]
	watchers map[chan EventView]struct{}
	minutes  [60]eventMinute // by unix minute modulo 60: the last hour
}

// eventMinute counts one source's events of one minute.
type eventMinute struct {
	at                 int64 // unix minute
	accepted, rejected uint32
}

// lastHour counts the source's accepted and rejected events of the hour before now; called with
// the log's lock held.
func (se *sourceEvents) lastHour(now time.Time) (accepted, rejected uint64) {
	first := now.Unix()/60 - 59
	for _, m := range se.minutes {
		if m.at >= first {
			accepted += uint64(m.accepted)
			rejected += uint64(m.rejected)
		}
	}
	return accepted, rejected
}

// tell sends v to every watcher of the source; called with the log's lock held.
func (se *sourceEvents) tell(v EventView) {
	for ch := range se.watchers {
		select {
		case ch <- v:
		default: // a watcher that does not keep up misses events, never slows the view
		}
	}
}

// Events is every source's recent events. Safe for concurrent use.
type Events struct {
	mu      sync.Mutex
	recent  int
	seq     uint64
	sources map[string]*sourceEvents
	types   Interner // the messages' types: a handful of values in every record
}

// NewEvents is an empty view keeping the last recent events of each source.
func NewEvents(recent int) *Events {
	return &Events{recent: recent, sources: map[string]*sourceEvents{}, types: Interner{}}
}

func (l *Events) source(id string) *sourceEvents {
	se := l.sources[id]
	if se == nil {
		se = &sourceEvents{ring: NewRing[event](l.recent, (*event).scrub), watchers: map[chan EventView]struct{}{}}
		l.sources[id] = se
	}
	return se
}

// Record is a tracking.events (Rejected false) or tracking.rejected record of a source.
type Record struct {
	Source   string
	R        *kgo.Record
	Rejected bool
	// SealedWith is the data key R's value is sealed with, for an accepted event kept sealed
	// (nil: R's value is plain). A rejected record is given opened: the view reads it.
	SealedWith *shred.Key
}

// Add records the events read, but those forgets reports (checked under the view's lock: a
// purge changes the rules, then takes it); it returns the message ids of those it skipped so.
func (l *Events) Add(batch []Record, forgets func(Record) bool) (dropped []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range batch {
		if forgets != nil && forgets(p) {
			dropped = append(dropped, MessageIDOf(p.R))
			continue
		}
		l.add(p)
	}
	return dropped
}

// MessageIDOf is the record's message-id header.
func MessageIDOf(r *kgo.Record) string {
	for _, h := range r.Headers {
		if h.Key == schemas.HeaderMessageID {
			return string(h.Value)
		}
	}
	return ""
}

// add records one event; called with mu held.
func (l *Events) add(p Record) {
	r, rejected := p.R, p.Rejected
	se := l.source(p.Source)
	l.seq++
	e := se.ring.Slot()
	e.seq, e.receivedAt, e.rejected = l.seq, r.Timestamp.UTC(), rejected
	e.typ, e.messageID, e.reason = "", "", ""
	for _, h := range r.Headers {
		switch h.Key {
		case schemas.HeaderType:
			e.typ = l.types.Get(h.Value)
		case schemas.HeaderMessageID:
			e.messageID = string(h.Value)
		case schemas.HeaderReason:
			e.reason = string(h.Value)
		}
	}
	value, truncated := r.Value, false
	if e.sealedWith = p.SealedWith; e.sealedWith == nil && len(value) > MaxEventBytes {
		value, truncated = value[:MaxEventBytes], true // a message refused for its size is kept as its start
	}
	if cap(e.raw) > maxSlotBytes {
		e.raw = nil // a slot never keeps more than one message's worth
	}
	e.raw = append(e.raw[:0], value...)
	e.key = append(e.key[:0], r.Key...)
	e.truncated = truncated
	if rejected && (e.typ == "" || e.messageID == "") {
		// tracking.rejected records carry only the reason: read the rest from the message,
		// when it is a JSON object.
		typ, id := RejectedFields(e.raw)
		if e.typ == "" && typ != nil {
			e.typ = string(typ)
		}
		if e.messageID == "" && id != nil {
			e.messageID = string(id)
		}
	}
	unix := e.receivedAt.Unix() / 60
	if m := &se.minutes[unix%60]; m.at <= unix {
		if m.at != unix {
			*m = eventMinute{at: unix}
		}
		if rejected {
			m.rejected++
		} else {
			m.accepted++
		}
	}
	if len(se.watchers) > 0 {
		if v, ok := e.view(); ok {
			se.tell(v)
		}
	}
}

// RejectedFields reads "type" and "messageId" of a rejected message when it is a JSON object:
// the text of each (the last, when a key repeats) when it is a string, nil when it is absent or
// not a string ("" for null).
func RejectedFields(raw []byte) (typ, messageID []byte) {
	var t, id []byte
	if schemas.EachMember(raw, func(key, v []byte) error {
		switch string(key) {
		case "type":
			t = v
		case "messageId":
			id = v
		}
		return nil
	}) != nil {
		return nil, nil
	}
	return jsonText(t), jsonText(id)
}

// jsonText is what json.Unmarshal of v into a string gives: its text, "" for null, nil for
// another value or none.
func jsonText(v []byte) []byte {
	if string(v) == "null" {
		return []byte{}
	}
	s, _ := schemas.JSONString(v)
	return s
}

// Recent is the source's last n events (all it keeps for n < 0), newest first.
func (l *Events) Recent(source string, n int) []EventView {
	out := []EventView{}
	l.mu.Lock()
	defer l.mu.Unlock()
	se := l.sources[source]
	if se == nil {
		return out
	}
	for e := range se.ring.Newest() {
		if len(out) == n {
			break
		}
		if v, ok := e.view(); ok {
			out = append(out, v)
		}
	}
	return out
}

// LastHour counts the source's accepted and rejected events of the hour before now.
func (l *Events) LastHour(source string, now time.Time) (accepted, rejected uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if se := l.sources[source]; se != nil {
		return se.lastHour(now)
	}
	return 0, 0
}

// Delivered is a copy of the message messageID accepted from one of sources, the newest the
// view holds of the first source that has it; nil when it holds none.
func (l *Events) Delivered(sources []string, messageID string) []byte {
	if messageID == "" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, src := range sources {
		se := l.sources[src]
		if se == nil {
			continue
		}
		for e := range se.ring.Newest() {
			if !e.rejected && e.messageID == messageID {
				if msg, ok := e.message(make([]byte, 0, len(e.raw))); ok {
					if e.sealedWith == nil {
						msg = append([]byte(nil), msg...)
					}
					return msg
				}
			}
		}
	}
	return nil
}

// Watch tells ch of the source's events as they are added (a send that would block is
// skipped: a watcher that does not keep up misses events); stop ends it.
func (l *Events) Watch(source string, ch chan EventView) (stop func()) {
	l.mu.Lock()
	se := l.source(source)
	se.watchers[ch] = struct{}{}
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		delete(se.watchers, ch)
		l.mu.Unlock()
	}
}

// Forget drops the events hides reports for their user (event.userID) and the time they were
// received, telling the live streams (StatusForgotten); it returns their message ids and how
// many it dropped.
func (l *Events) Forget(hides func(user string, receivedAt time.Time) bool) (ids []string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, se := range l.sources {
		var told []EventView // the live streams' pages remove them
		n += se.ring.Remove(func(e *event) bool {
			if !hides(e.userID(), e.receivedAt) {
				return false
			}
			ids = append(ids, e.messageID)
			if len(se.watchers) > 0 {
				told = append(told, EventView{ID: strconv.FormatUint(e.seq, 10), ReceivedAt: e.receivedAt, Status: StatusForgotten})
			}
			return true
		})
		for _, v := range told {
			se.tell(v)
		}
	}
	return ids, n
}

// Prune drops the events of every source keep returns false for, but of one watched.
func (l *Events) Prune(keep func(source string) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, se := range l.sources {
		if !keep(id) && len(se.watchers) == 0 {
			delete(l.sources, id)
		}
	}
}
