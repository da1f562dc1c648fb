package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The source debugger: tracking.events (accepted) and tracking.rejected (with the reason),
// read as they are written, per source: the last RecentEvents of each, and a Server-Sent Events
// stream for every watcher. At start the console reads the last EventsBackfill records of each
// partition again, to refill the recent events.

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
	truncated  bool   // raw is the first maxEventBytes of a larger message
}

// userID is whose the event is: its message's userId, else its anonymousId ("" for neither),
// the user a regulation names (docs/console.md#what-the-console-forgets). An accepted event's
// record is keyed by just that; a rejected message is read for it (its key is the inbound
// record's on the front door), and one that is not a JSON object is its key's.
func (e *event) userID() string {
	if !e.rejected {
		return string(e.key)
	}
	if id, ok := messageUser(e.raw); ok {
		return string(id)
	}
	return string(e.key)
}

// messageUser is a message's userId as text, else its anonymousId (nil for neither, or ids that
// are not strings); false when raw is not a JSON object.
func messageUser(raw []byte) ([]byte, bool) {
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

// remove drops the events drop returns true for, keeping the others in order; called with the
// log's lock held. It returns how many it dropped.
func (se *sourceEvents) remove(drop func(*event) bool) int {
	n := len(se.ring)
	start := (se.next - se.size + n) % n // 0 unless the ring is full
	kept := make([]event, 0, se.size)
	var freed []event
	for i := range se.size {
		e := se.ring[(start+i)%n]
		if drop(&e) {
			e.scrub()
			freed = append(freed, e)
			continue
		}
		kept = append(kept, e)
	}
	if len(freed) == 0 {
		return 0
	}
	// Back into the slots they came from (the first size slots: start is 0 unless the ring is
	// full), oldest first, the emptied ones last: each slot keeps a buffer of its own.
	copy(se.ring, append(kept, freed...))
	se.next, se.size = len(kept)%n, len(kept)
	return len(freed)
}

// maxEventBytes is the most of one message the debugger keeps: Segment's 32 KB limit (a larger
// message is rejected, and shown by its first 32 KB, as text).
const maxEventBytes = 32 << 10

// eventView is the API's form of an event.
type eventView struct {
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

func (e *event) view() eventView {
	v := eventView{ID: strconv.FormatUint(e.seq, 10), ReceivedAt: e.receivedAt, Status: "accepted", Type: e.typ, MessageID: e.messageID, Reason: e.reason, Truncated: e.truncated}
	if e.rejected {
		v.Status = "rejected"
	}
	if !e.truncated && json.Valid(e.raw) {
		v.Message = append(json.RawMessage(nil), e.raw...)
	} else { // a rejected message that is not JSON: shown as the text it was
		v.Message, _ = json.Marshal(string(e.raw))
	}
	return v
}

// sourceEvents is one source's recent events, watchers and per-minute counts.
type sourceEvents struct {
	ring     []event
	next     int
	size     int
	watchers map[chan eventView]struct{}
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

// eventLog is every source's recent events. Safe for concurrent use.
type eventLog struct {
	mu      sync.Mutex
	recent  int
	seq     uint64
	sources map[string]*sourceEvents
	types   interner // the messages' types: a handful of values in every record
	ready   chan struct{}
}

func newEventLog(recent int) *eventLog {
	return &eventLog{recent: recent, sources: map[string]*sourceEvents{}, types: interner{}, ready: make(chan struct{})}
}

func (l *eventLog) source(id string) *sourceEvents {
	se := l.sources[id]
	if se == nil {
		se = &sourceEvents{ring: make([]event, l.recent), watchers: map[chan eventView]struct{}{}}
		l.sources[id] = se
	}
	return se
}

// add records one event; called with mu held.
func (l *eventLog) add(source string, r *kgo.Record, rejected bool) {
	se := l.source(source)
	l.seq++
	e := &se.ring[se.next]
	e.seq, e.receivedAt, e.rejected = l.seq, r.Timestamp.UTC(), rejected
	e.typ, e.messageID, e.reason = "", "", ""
	for _, h := range r.Headers {
		switch h.Key {
		case schemas.HeaderType:
			e.typ = l.types.get(h.Value)
		case schemas.HeaderMessageID:
			e.messageID = string(h.Value)
		case schemas.HeaderReason:
			e.reason = string(h.Value)
		}
	}
	value, truncated := r.Value, false
	if len(value) > maxEventBytes { // a message refused for its size is kept as its start
		value, truncated = value[:maxEventBytes], true
	}
	if cap(e.raw) > maxEventBytes {
		e.raw = nil // a slot never keeps more than one message's worth
	}
	e.raw = append(e.raw[:0], value...)
	e.key = append(e.key[:0], r.Key...)
	e.truncated = truncated
	if rejected && (e.typ == "" || e.messageID == "") {
		// tracking.rejected records carry only the reason: read the rest from the message,
		// when it is a JSON object.
		typ, id := rejectedFields(e.raw)
		if e.typ == "" && typ != nil {
			e.typ = string(typ)
		}
		if e.messageID == "" && id != nil {
			e.messageID = string(id)
		}
	}
	se.next = (se.next + 1) % len(se.ring)
	se.size = min(se.size+1, len(se.ring))
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
		se.tell(e.view())
	}
}

// tell sends v to every watcher of the source; called with the log's lock held.
func (se *sourceEvents) tell(v eventView) {
	for ch := range se.watchers {
		select {
		case ch <- v:
		default: // a watcher that does not keep up misses events, never slows the view
		}
	}
}

// statusForgotten is the status of an event the console forgot (docs/console.md#what-the-console-forgets):
// a live stream sends "event: forgotten" with its id, and the debugger's page removes it.
const statusForgotten = "forgotten"

// rejectedFields reads "type" and "messageId" of a rejected message when it is a JSON object:
// the text of each (the last, when a key repeats) when it is a string, nil when it is absent or
// not a string ("" for null).
func rejectedFields(raw []byte) (typ, messageID []byte) {
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

// sourceOf is the record's source id (HeaderSourceID), shared through in; "" for none.
func sourceOf(r *kgo.Record, in interner) string {
	for _, h := range r.Headers {
		if h.Key == schemas.HeaderSourceID {
			return in.get(h.Value)
		}
	}
	return ""
}

// runEvents keeps the debugger's view of tracking.events and tracking.rejected.
func (s *Service) runEvents(ctx context.Context) error {
	type pending struct {
		source   string
		r        *kgo.Record
		rejected bool
	}
	if !waitReady(ctx, s.forget.ready) {
		return nil // the rules first: nothing of a deleted user is read back, even for a moment
	}
	var batch []pending
	sources := interner{} // the source ids, read in every record
	return s.runView(ctx, "events", s.events.ready, platform.TopicReaderConfig{
		Topics: []string{s.cfg.EventsTopic, s.cfg.RejectedTopic}, Start: platform.StartLast(s.cfg.EventsBackfill),
		Apply: func(r *kgo.Record) {
			src := sourceOf(r, sources)
			if src == "" {
				return // a rejected message of no known source
			}
			if r = s.opened(r); r == nil {
				return // sealed with a shredded key: its user was deleted
			}
			batch = append(batch, pending{source: src, r: r, rejected: r.Topic == s.cfg.RejectedTopic})
		},
	}, func() {
		if len(batch) == 0 {
			return
		}
		var dropped []string
		s.events.mu.Lock()
		for _, p := range batch {
			if s.forgets(p.r, p.rejected) {
				dropped = append(dropped, messageIDOf(p.r))
				continue
			}
			s.events.add(p.source, p.r, p.rejected)
		}
		s.events.mu.Unlock()
		if len(dropped) > 0 {
			s.metrics.forgotten.WithLabelValues("events").Add(float64(len(dropped)))
			s.forget.forgetMessages(dropped)
			s.dropAttempts(dropped) // of a message read late, after the purge
		}
		clear(batch)
		batch = batch[:0]
	})
}

// forgets reports whether the console forgets the event r (docs/console.md#what-the-console-forgets):
// it is a deleted or suppressed user's (event.userID), and the user's rule hides it.
func (s *Service) forgets(r *kgo.Record, rejected bool) bool {
	if s.forget.ruled.Load() == 0 {
		return false
	}
	user := r.Key
	if rejected {
		if id, ok := messageUser(r.Value); ok {
			user = id
		}
	}
	return s.forget.hides(string(user), r.Timestamp)
}

// messageIDOf is the record's message-id header.
func messageIDOf(r *kgo.Record) string {
	for _, h := range r.Headers {
		if h.Key == schemas.HeaderMessageID {
			return string(h.Value)
		}
	}
	return ""
}

// recentEvents answers the source's last events, newest first.
func (s *Service) recentEvents(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, ok := s.deps.Store.Snapshot().SourceByID(id); !ok {
		return errNotFound("no source %q", id)
	}
	out := []eventView{}
	s.events.mu.Lock()
	if se := s.events.sources[id]; se != nil {
		for i := 1; i <= se.size; i++ {
			out = append(out, se.ring[(se.next-i+len(se.ring))%len(se.ring)].view())
		}
	}
	s.events.mu.Unlock()
	writeData(w, http.StatusOK, out)
	return nil
}

// sseHeartbeat is how often an idle stream sends a comment, so proxies keep it open.
const sseHeartbeat = 15 * time.Second

// streamLimits counts the open live streams (docs/console.md#live-stream-limits): at most max
// on the console, perClient per client (a UI session; the API's callers, who share its one
// token, together). Safe for concurrent use.
type streamLimits struct {
	mu             sync.Mutex
	max, perClient int
	total          int
	clients        map[string]int
}

func newStreamLimits(max, perClient int) *streamLimits {
	return &streamLimits{max: max, perClient: perClient, clients: map[string]int{}}
}

// acquire takes a stream for client, or returns the 429 error that refuses it; release gives
// it back.
func (l *streamLimits) acquire(client string) (release func(), err *apiError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.total >= l.max:
		return nil, &apiError{Status: http.StatusTooManyRequests, Code: codeTooManyStreams,
			Message: fmt.Sprintf("the console has %d live streams open, its limit (CONSOLE_MAX_STREAMS): try again when one ends", l.total)}
	case l.clients[client] >= l.perClient && client == apiStreamClient:
		return nil, &apiError{Status: http.StatusTooManyRequests, Code: codeTooManyStreams,
			Message: fmt.Sprintf("the API's callers have %d live streams open, their limit (CONSOLE_MAX_STREAMS_PER_SESSION, shared by every caller of the token): close one first", l.clients[client])}
	case l.clients[client] >= l.perClient:
		return nil, &apiError{Status: http.StatusTooManyRequests, Code: codeTooManyStreams,
			Message: fmt.Sprintf("you have %d live streams open, the limit per session (CONSOLE_MAX_STREAMS_PER_SESSION): close one (a tab of a source's page) first", l.clients[client])}
	}
	l.total++
	l.clients[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if l.clients[client]--; l.clients[client] <= 0 {
				delete(l.clients, client)
			}
		})
	}, nil
}

// apiStreamClient is the stream client of every API caller: they share CONSOLE_TOKEN.
const apiStreamClient = "api"

// liveEvents streams the source's events as Server-Sent Events (text/event-stream) as they
// arrive: "event: accepted" or "event: rejected", "id:", and the event's JSON as data. Beyond the
// stream limits it answers 429 with the error body.
func (s *Service) liveEvents(w http.ResponseWriter, r *http.Request) error {
	return s.streamEvents(w, r, apiStreamClient, false)
}

// streamEvents is the live stream of the source r names, for client. Beyond the stream limits
// it answers 429 with the error body, or, with refuseInStream (the UI's EventSource, which
// shows no error body), a stream of one "event: refused" whose data is the error, and no
// reconnection for a minute. Every write has a deadline (StreamWriteTimeout): a client that
// stops reading is dropped, and the stream's goroutine ends.
func (s *Service) streamEvents(w http.ResponseWriter, r *http.Request, client string, refuseInStream bool) error {
	id := r.PathValue("id")
	if _, ok := s.deps.Store.Snapshot().SourceByID(id); !ok {
		return errNotFound("no source %q", id)
	}
	rc := http.NewResponseController(w)
	// write sends one piece of the stream and flushes it, within the write deadline.
	write := func(format string, args ...any) error {
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.StreamWriteTimeout))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return err
		}
		return rc.Flush()
	}
	h := w.Header()
	release, refused := s.streams.acquire(client)
	if refused != nil {
		s.metrics.streamsRefused.Inc()
		if !refuseInStream {
			w.Header().Set("Retry-After", "5")
			return refused
		}
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		b, _ := json.Marshal(refused)
		_ = write("retry: 60000\nevent: refused\ndata: %s\n\n", b)
		return nil
	}
	defer release()
	ch := make(chan eventView, 256)
	s.events.mu.Lock()
	se := s.events.source(id)
	se.watchers[ch] = struct{}{}
	s.events.mu.Unlock()
	s.metrics.liveStreams.Inc()
	defer func() {
		s.events.mu.Lock()
		delete(se.watchers, ch)
		s.events.mu.Unlock()
		s.metrics.liveStreams.Dec()
	}()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := write("retry: 2000\n: watching source %s\n\n", id); err != nil {
		return nil
	}
	beat := time.NewTicker(sseHeartbeat)
	defer beat.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return nil
		case <-s.stopping:
			return nil
		case <-beat.C:
			err = write(": keep-alive\n\n")
		case v := <-ch:
			b, _ := json.Marshal(v)
			err = write("event: %s\nid: %s\ndata: %s\n\n", v.Status, v.ID, b)
		}
		if err != nil {
			return nil // the client went away, or stopped reading
		}
	}
}
