package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// Replays by time range and filter (docs/delivery.md#replay): the console reads
// tracking.events from a time on, keeps the messages of the range that match the filter and
// that the router would deliver to the destination, and writes one webhooks.deliveries record
// for each, as the router does, with the header replay (the replay's id: the deliverer sends it
// as X-Tributary-Replay) and, for a replay to another URL, the header url. It writes them at
// most maxPerSecond a second. A replay lives in the console's memory: a console restart stops
// the running ones, and forgets every one (docs/delivery.md#replay).

// Replay bounds.
const (
	// defaultReplayRate is a replay's maxPerSecond when the request gives none.
	defaultReplayRate = 100
	// maxReplayRate is the highest maxPerSecond: above it a replay would crowd out the live
	// traffic of the deliverer.
	maxReplayRate = 5000
	// maxRunningReplays bounds the replays running at once.
	maxRunningReplays = 4
	// replayCatchUp is how far behind its schedule a replay may fall and still catch up (at
	// most this long's records sent back to back); further behind, it starts its schedule
	// again.
	replayCatchUp = 250 * time.Millisecond
	// keptReplays is how many replays the console remembers (the running ones and the last
	// finished ones).
	keptReplays = 100
)

// Replay states.
const (
	replayRunning   = "running"
	replayDone      = "done"
	replayCancelled = "cancelled"
	replayFailed    = "failed"
)

// replayFilter narrows a replay: each member set must match exactly (sourceId: the source of
// the message; type, event, userId: the message's).
type replayFilter struct {
	Type     string `json:"type,omitempty"`
	Event    string `json:"event,omitempty"`
	UserID   string `json:"userId,omitempty"`
	SourceID string `json:"sourceId,omitempty"`
}

// replayQuery is a checked replay request: what to read and where it goes.
type replayQuery struct {
	dest     *schemas.Destination
	from, to time.Time
	filter   replayFilter
	rate     int
	url      string
	topic    string          // webhooks.deliveries
	sources  map[string]bool // the sources the messages may come from
	// blocked are the event names each source's tracking plan blocks.
	blocked map[string][]string
	// The filter's values (nil: any), compared with the members the scan reads.
	typ, event, userID []byte
}

// replay is one replay's progress; its mutex guards every field below it.
type replay struct {
	ID            string
	mu            sync.Mutex
	destinationID string
	url           string // without credentials
	from, to      time.Time
	filter        replayFilter
	rate          int
	matched       int64
	sent          int64
	delivered     int64
	failed        int64
	state         string
	errMsg        string
	startedAt     time.Time
	endedAt       time.Time
	finished      map[string]bool // message id → delivered (true) or failed (false)
	cancel        context.CancelFunc
}

// replayView is a replay as the API answers it.
type replayView struct {
	ID            string       `json:"id"`
	DestinationID string       `json:"destinationId"`
	URL           string       `json:"url,omitempty"`
	From          string       `json:"from"`
	To            string       `json:"to"`
	Filter        replayFilter `json:"filter"`
	MaxPerSecond  int          `json:"maxPerSecond"`
	Matched       int64        `json:"matched"`
	Sent          int64        `json:"sent"`
	Delivered     int64        `json:"delivered"`
	Failed        int64        `json:"failed"`
	State         string       `json:"state"`
	Error         string       `json:"error,omitempty"`
	StartedAt     string       `json:"startedAt"`
	EndedAt       string       `json:"endedAt,omitempty"`
}

func (p *replay) view() replayView {
	p.mu.Lock()
	defer p.mu.Unlock()
	v := replayView{ID: p.ID, DestinationID: p.destinationID, URL: p.url, From: schemas.FormatTimestamp(p.from), To: schemas.FormatTimestamp(p.to),
		Filter: p.filter, MaxPerSecond: p.rate, Matched: p.matched, Sent: p.sent, Delivered: p.delivered, Failed: p.failed,
		State: p.state, Error: p.errMsg, StartedAt: schemas.FormatTimestamp(p.startedAt)}
	if !p.endedAt.IsZero() {
		v.EndedAt = schemas.FormatTimestamp(p.endedAt)
	}
	return v
}

// end sets a final state, unless the replay already has one.
func (p *replay) end(state, msg string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != replayRunning {
		return
	}
	p.state, p.errMsg, p.endedAt = state, msg, now
}

// replays are the console's replays, newest last. The mutex guards the list.
type replays struct {
	mu   sync.Mutex
	list []*replay
	// watched counts the replays whose attempts are counted: observe does nothing without.
	watched int
}

func (rs *replays) get(id string) *replay {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, p := range rs.list {
		if p.ID == id {
			return p
		}
	}
	return nil
}

// all are the replays, newest first, of one destination ("": every one).
func (rs *replays) all(destID string) []*replay {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []*replay
	for i := len(rs.list) - 1; i >= 0; i-- {
		if destID == "" || rs.list[i].destinationID == destID {
			out = append(out, rs.list[i])
		}
	}
	return out
}

// add keeps p, unless maxRunningReplays are running; the oldest finished replays beyond
// keptReplays are forgotten.
func (rs *replays) add(p *replay) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	running := 0
	for _, q := range rs.list {
		q.mu.Lock()
		if q.state == replayRunning {
			running++
		}
		q.mu.Unlock()
	}
	if running >= maxRunningReplays {
		return false
	}
	rs.list = append(rs.list, p)
	rs.watched = len(rs.list)
	for len(rs.list) > keptReplays {
		i := slices.IndexFunc(rs.list, func(q *replay) bool {
			q.mu.Lock()
			defer q.mu.Unlock()
			return q.state != replayRunning
		})
		if i < 0 {
			break
		}
		rs.list = slices.Delete(rs.list, i, i+1)
	}
	return true
}

var replayIDMember = []byte(`"replayId":`)

// observe counts one webhooks.attempts record (opened) in its replay's progress: a message
// is delivered at its first successful POST, failed when it is dead-lettered or dropped
// (suppressed or deleted user) without one. Called from the attempts view's reader.
func (rs *replays) observe(value []byte) {
	rs.mu.Lock()
	watched := rs.watched
	rs.mu.Unlock()
	if watched == 0 || !bytes.Contains(value, replayIDMember) {
		return
	}
	a, err := schemas.DecodeAttemptRecord(value)
	if err != nil || a.ReplayID == "" || a.Test {
		return
	}
	p := rs.get(a.ReplayID)
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, done := p.finished[a.MessageID]; done {
		return
	}
	switch {
	case a.ErrorClass == schemas.ClassOK:
		p.finished[a.MessageID] = true
		p.delivered++
	case a.DeadLettered != "" || a.ErrorClass == schemas.ClassSuppressed || a.ErrorClass == schemas.ClassDeleted:
		p.finished[a.MessageID] = false
		p.failed++
	}
}

// newReplayID is a fresh replay id: "rp_" and 16 hex digits.
func newReplayID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "rp_" + hex.EncodeToString(b[:])
}

// replayForbids reports whether user's message received at t may never be replayed: the user
// is suppressed now, or the message is hidden by the user's rules (received before the user's
// deletion, or while suppressed: docs/console.md#what-the-console-forgets).
func (f *forgetting) replayForbids(user string, t time.Time) bool {
	if f.ruled.Load() == 0 || user == "" {
		return false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	u := f.users[user]
	if u == nil {
		return false
	}
	return u.hides(t) || (len(u.marks) > 0 && u.marks[len(u.marks)-1].on)
}

// replayMatch is one message a replay sends: the record read and its opened value.
type replayMatch struct {
	r     *kgo.Record
	value []byte
	key   *shred.Key // of a sealed record, nil for a plain one
}

// scanReplay reads tracking.events from q.from to its end (as it is when the scan starts) and
// calls each, in offset order within a partition, for every message of [q.from, q.to] that q
// selects. It returns how many it selected. each may block (pacing); the value it gets is
// valid until it returns.
func (s *Service) scanReplay(ctx context.Context, q *replayQuery, each func(m replayMatch) error) (int64, error) {
	var n int64
	var failed error
	var opened []byte
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	src := interner{}
	r, err := platform.NewTopicReader(platform.TopicReaderConfig{
		Kafka: s.deps.Kafka, Topic: s.cfg.EventsTopic, Start: platform.StartAfter(q.from), ReadCommitted: true,
		Opts: s.deps.KafkaOpts, Logger: s.logger,
		Apply: func(r *kgo.Record) {
			if failed != nil || r.Timestamp.After(q.to) || r.Timestamp.Before(q.from) {
				return
			}
			id := sourceOf(r, src)
			if !q.sources[id] {
				return
			}
			if s.forget.replayForbids(string(r.Key), r.Timestamp) {
				return
			}
			m := replayMatch{r: r, value: r.Value}
			if hexID := shred.KeyOf(r); hexID != nil {
				key, err := s.dataKeys.Key(hexID)
				if err == nil {
					opened, err = key.Open(opened[:0], r.Value)
				}
				if err != nil {
					return // shredded (a deleted user), or not readable: never replayed
				}
				m.value, m.key = opened, key
			}
			if !q.matches(m.value, q.blocked[id]) {
				return
			}
			n++
			if each != nil {
				if err := each(m); err != nil {
					failed = err
					cancel()
				}
			}
		},
	})
	if err != nil {
		return 0, err
	}
	err = r.Run(ctx)
	if failed != nil {
		return n, failed
	}
	return n, err
}

// matches reports whether the message (a canonical tracking.events value) is one q selects
// and one the router would deliver to q.dest (docs/routing.md): a track call not blocked by
// its source's tracking plan (blocked), not switched off for webhooks by its integrations.
func (q *replayQuery) matches(value []byte, blocked []string) bool {
	sum := schemas.SummarizeBody(value)
	if !sameString(sum.Type, q.typ) || !sameString(sum.Event, q.event) || !sameString(sum.UserID, q.userID) {
		return false
	}
	v, err := schemas.DecodeRoutingView(value)
	if err != nil || (v.Type == schemas.TypeTrack && slices.Contains(blocked, v.Event)) {
		return false
	}
	return integrationsAllow(v.Integrations, schemas.IntegrationWebhooks)
}

// sameString reports whether raw (a JSON value as read) is the JSON string want; a nil want
// matches anything.
func sameString(raw, want []byte) bool {
	if want == nil {
		return true
	}
	text, ok := schemas.JSONString(raw)
	return ok && bytes.Equal(text, want)
}

// integrationsAllow is the router's rule (docs/routing.md): the destination's own key, else
// "All" (or "all"), else on.
func integrationsAllow(integrations []byte, key string) bool {
	if len(integrations) == 0 {
		return true
	}
	for _, k := range []string{key, "All", "all"} {
		if on, set := schemas.IntegrationSetting(integrations, k); set {
			return on
		}
	}
	return true
}

// runReplay writes p's deliveries, at most q.rate a second, until the scan ends or ctx is
// cancelled, and sets p's final state.
func (s *Service) runReplay(ctx context.Context, p *replay, q *replayQuery) {
	firstAt := []byte(schemas.FormatTimestamp(s.now()))
	start := time.Now()
	interval := time.Second / time.Duration(q.rate)
	var produced sync.WaitGroup
	var mu sync.Mutex
	var produceErr error
	var i int64
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	_, err := s.scanReplay(ctx, q, func(m replayMatch) error {
		mu.Lock()
		err := produceErr
		mu.Unlock()
		if err != nil {
			return err
		}
		// The i-th record goes at start + i/rate: the rate holds over the whole replay, a late
		// wake-up made up by the next records. A replay that fell further behind than
		// replayCatchUp (a slow read) starts its schedule again from now rather than catching
		// up in a burst above the cap.
		wait := time.Until(start.Add(time.Duration(i) * interval))
		if wait < -max(interval, replayCatchUp) {
			start, wait = time.Now().Add(-time.Duration(i)*interval), 0
		}
		if wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		i++
		rec, err := q.delivery(m, p.ID, firstAt)
		if err != nil {
			return nil // a message the router would refuse as invalid is not sent either
		}
		produced.Add(1)
		s.producer.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			defer produced.Done()
			if err != nil {
				mu.Lock()
				produceErr = err
				mu.Unlock()
				return
			}
			p.mu.Lock()
			p.sent++
			p.mu.Unlock()
		})
		return nil
	})
	produced.Wait()
	now := s.now()
	switch {
	case ctx.Err() != nil:
		p.end(replayCancelled, "", now)
	case produceErr != nil:
		s.logger.Error().Err(produceErr).Str("replay_id", p.ID).Msg("replay failed")
		p.end(replayFailed, "writing to "+s.cfg.DeliveriesTopic+" failed: see the console's log", now)
	case err != nil:
		s.logger.Error().Err(err).Str("replay_id", p.ID).Msg("replay failed")
		p.end(replayFailed, "reading "+s.cfg.EventsTopic+" failed: see the console's log", now)
	default:
		p.end(replayDone, "", now)
		s.logger.Info().Str("replay_id", p.ID).Str("destination_id", p.destinationID).Int64("sent", p.view().Sent).Msg("replay done")
	}
}

// delivery builds the webhooks.deliveries record of one replayed message, as the router
// builds it (docs/topics.md#webhooksdeliveries), with the headers replay and, for a replay
// to another URL, url. A sealed message's body is sealed with its key.
func (q *replayQuery) delivery(m replayMatch, replayID string, firstAt []byte) (*kgo.Record, error) {
	headroom := 0
	if m.key != nil {
		headroom = shred.Headroom
	}
	v, body, err := schemas.DecodeRoutingViewAppendBody(make([]byte, headroom, headroom+len(m.value)+64+shred.TagSize), m.value)
	if err != nil {
		return nil, err
	}
	if m.key != nil {
		body = m.key.SealReserved(body)
	}
	user := v.UserID
	if user == "" {
		user = v.AnonymousID
	}
	headers := []kgo.RecordHeader{
		{Key: schemas.HeaderDestinationID, Value: []byte(q.dest.ID)},
		{Key: schemas.HeaderMessageID, Value: []byte(v.MessageID)},
		{Key: schemas.HeaderAttempt, Value: []byte("1")},
		{Key: schemas.HeaderFirstAttemptAt, Value: firstAt},
		{Key: schemas.HeaderType, Value: []byte(v.Type)},
		{Key: schemas.HeaderSourceID, Value: headerOf(m.r, schemas.HeaderSourceID)},
		{Key: schemas.HeaderReplay, Value: []byte(replayID)},
	}
	if m.key != nil {
		headers = append(headers, kgo.RecordHeader{Key: schemas.HeaderDataKey, Value: m.key.ID()})
	}
	if q.url != "" {
		headers = append(headers, kgo.RecordHeader{Key: schemas.HeaderURL, Value: []byte(q.url)})
	}
	return &kgo.Record{Topic: q.topic, Key: []byte(q.dest.ID + ":" + user), Value: body, Headers: headers}, nil
}

// headerOf is the value of r's first header named key, nil for none.
func headerOf(r *kgo.Record, key string) []byte {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}

// errReplayTooMany refuses a replay beyond maxRunningReplays.
var errReplayTooMany = &apiError{Status: 409, Code: codeConflict,
	Message: fmt.Sprintf("%d replays are running: wait for one to end, or cancel one", maxRunningReplays)}
