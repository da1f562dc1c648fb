package console

import (
	"context"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The delivery log: webhooks.attempts materialised in bounded memory. Per destination it keeps
// the last AttemptsPerDestination attempts (a ring) and, per minute of the last StatsWindow,
// the count of attempts, successes, failures by class and a latency histogram (p50/p99). At
// start the console reads the attempts of the last StatsWindow again, so a restarted console
// shows the same log and stats.

// attempt is one line of webhooks.attempts (schemas.AttemptRecord) as the log keeps and the API
// answers it.
type attempt struct {
	Seq           uint64    `json:"id,string"`
	At            time.Time `json:"at"`
	DestinationID string    `json:"destinationId"`
	MessageID     string    `json:"messageId"`
	URL           string    `json:"url"`
	Attempt       int       `json:"attempt"`
	Status        int       `json:"status"`
	LatencyMs     float64   `json:"latencyMs"`
	ErrorClass    string    `json:"errorClass"`
	Error         string    `json:"error,omitempty"`
	Test          bool      `json:"test,omitempty"`
}

// successClass is the error class of a 2xx.
const successClass = string(schemas.ClassOK)

// otherClass counts the failures of a class the console does not know (a newer deliverer's).
const otherClass = "other"

// failureClasses are the error classes but ok (schemas.Classes, docs/delivery.md), in the order
// of the counters, then otherClass; "suppressed" and "deleted" are records the deliverer dropped
// unsent because their user is suppressed or deleted
// (docs/delivery.md#deleted-and-suppressed-users).
var failureClasses = func() []string {
	out := make([]string, 0, schemas.ErrorClassCount)
	for _, c := range schemas.Classes() {
		if c != schemas.ClassOK {
			out = append(out, string(c))
		}
	}
	return append(out, otherClass)
}()

func classIndex(c string) int {
	if i := slices.Index(failureClasses, c); i >= 0 {
		return i
	}
	return len(failureClasses) - 1
}

// Latency histogram: bucket i holds latencies up to histBase·histRatio^i ms.
const (
	histBuckets = 64
	histBase    = 0.1
	histRatio   = 1.25
)

var logRatio = math.Log(histRatio)

func histBucket(ms float64) int {
	if ms <= histBase {
		return 0
	}
	i := int(math.Ceil(math.Log(ms/histBase) / logRatio))
	return min(i, histBuckets-1)
}

// histValue is the value a bucket stands for: the geometric middle of its bounds.
func histValue(i int) float64 {
	if i == 0 {
		return histBase
	}
	return histBase * math.Pow(histRatio, float64(i)-0.5)
}

// minute is the counters of one minute of one destination.
type minute struct {
	at        int64 // unix minute
	attempts  uint32
	successes uint32
	failures  [schemas.ErrorClassCount]uint32 // by failureClasses: every class but ok, then other
	hist      [histBuckets]uint32
}

// destLog is one destination's log and counters.
type destLog struct {
	ring    []attempt
	next    int
	size    int
	minutes []*minute // by unix minute modulo len
}

// attemptLog is every destination's log. Safe for concurrent use.
type attemptLog struct {
	mu      sync.RWMutex
	perDest int
	window  time.Duration
	dests   map[string]*destLog
	seq     uint64
	ready   chan struct{}
	// waiters are told of new attempts of a message id (destination tests).
	waiters map[string][]chan attempt
}

func newAttemptLog(perDest int, window time.Duration) *attemptLog {
	return &attemptLog{perDest: perDest, window: window, dests: map[string]*destLog{}, ready: make(chan struct{}), waiters: map[string][]chan attempt{}}
}

// add records one attempt; called with mu held.
func (l *attemptLog) add(a attempt) {
	d := l.dests[a.DestinationID]
	if d == nil {
		d = &destLog{ring: make([]attempt, l.perDest), minutes: make([]*minute, int(l.window/time.Minute))}
		l.dests[a.DestinationID] = d
	}
	l.seq++
	a.Seq = l.seq
	d.ring[d.next] = a
	d.next = (d.next + 1) % len(d.ring)
	d.size = min(d.size+1, len(d.ring))

	for _, ch := range l.waiters[a.MessageID] {
		select {
		case ch <- a:
		default:
		}
	}
	if a.Test {
		return // a test event is in the log, not in the destination's stats
	}
	unix := a.At.Unix() / 60
	slot := int(unix % int64(len(d.minutes)))
	m := d.minutes[slot]
	if m == nil {
		m = &minute{}
		d.minutes[slot] = m
	}
	if m.at != unix {
		if m.at > unix { // older than the window kept in this slot: count it nowhere
			return
		}
		*m = minute{at: unix}
	}
	m.attempts++
	if a.ErrorClass == successClass {
		m.successes++
	} else {
		m.failures[classIndex(a.ErrorClass)]++
	}
	m.hist[histBucket(a.LatencyMs)]++
}

// remove drops the attempts drop returns true for, keeping the others in order (the counters
// stay: they hold no message); called with the log's lock held. It returns how many it dropped.
func (d *destLog) remove(drop func(*attempt) bool) int {
	n := len(d.ring)
	start := (d.next - d.size + n) % n // 0 unless the ring is full
	kept := make([]attempt, 0, d.size)
	for i := range d.size {
		if a := d.ring[(start+i)%n]; !drop(&a) {
			kept = append(kept, a)
		}
	}
	dropped := d.size - len(kept)
	if dropped == 0 {
		return 0
	}
	clear(d.ring)
	copy(d.ring, kept)
	d.next, d.size = len(kept)%n, len(kept)
	return dropped
}

// wait registers ch for the attempts of messageID; the returned func unregisters it.
func (l *attemptLog) wait(messageID string, ch chan attempt) func() {
	l.mu.Lock()
	l.waiters[messageID] = append(l.waiters[messageID], ch)
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.waiters[messageID] = slices.DeleteFunc(l.waiters[messageID], func(c chan attempt) bool { return c == ch })
		if len(l.waiters[messageID]) == 0 {
			delete(l.waiters, messageID)
		}
	}
}

// runAttempts keeps the delivery log: webhooks.attempts from StatsWindow ago, then as written.
func (s *Service) runAttempts(ctx context.Context) error {
	// The rules and the recent events first: the attempts of a forgotten message are not read
	// back (docs/console.md#what-the-console-forgets).
	if !waitReady(ctx, s.forget.ready, s.events.ready) {
		return nil
	}
	var batch []attempt
	dec := newAttemptDecoder()
	return s.runView(ctx, "attempts", s.attempts.ready, platform.TopicReaderConfig{
		Topic: s.cfg.AttemptsTopic, Start: platform.StartAfter(s.now().Add(-s.cfg.StatsWindow)),
		Apply: func(r *kgo.Record) {
			a, ok := dec.attempt(r)
			if !ok {
				s.metrics.attemptsSkipped.Inc()
				return
			}
			batch = append(batch, a)
		},
	}, func() {
		if len(batch) == 0 {
			return
		}
		forgotten := 0
		s.attempts.mu.Lock()
		for _, a := range batch {
			// Checked under the log's lock: a purge remembers the message ids, then takes it.
			if a.MessageID != "" && s.forget.messageForgotten(a.MessageID) {
				forgotten++
				continue
			}
			s.attempts.add(a)
		}
		s.attempts.mu.Unlock()
		if forgotten > 0 {
			s.metrics.forgotten.WithLabelValues("attempts").Add(float64(forgotten))
		}
		s.metrics.attemptsRead.Add(float64(len(batch)))
		clear(batch)
		batch = batch[:0]
	})
}

// attemptNames are the JSON names of schemas.AttemptRecord's fields, in their order (the order
// the deliverer writes them).
var attemptNames = []string{"destinationId", "messageId", "url", "attempt", "status", "latencyMs", "errorClass", "error", "concurrencyLimit", "pausedForMs", "test", "at"}

// attemptFields are those members as read: the strings alias the record. The log keeps no
// concurrencyLimit nor pausedForMs; they are read to refuse a record as
// schemas.DecodeAttemptRecord would.
type attemptFields struct {
	destinationID, messageID, url, errorClass, err, at []byte
	attempt, status, concurrencyLimit, pausedForMs     int
	latencyMs                                          float64
	test                                               bool
}

// decodeAttemptFields reads b's attemptNames into f as schemas.DecodeAttemptRecord
// (json.Unmarshal) reads them (console/decode.go); errUnsure for a record it leaves to
// json.Unmarshal.
func decodeAttemptFields(b []byte, f *attemptFields) error {
	err := schemas.EachMember(b, func(key, v []byte) error {
		i, err := fieldIndex(key, attemptNames)
		switch i {
		case 0:
			return decodeString(v, &f.destinationID)
		case 1:
			return decodeString(v, &f.messageID)
		case 2:
			return decodeString(v, &f.url)
		case 3:
			return decodeInt(v, &f.attempt)
		case 4:
			return decodeInt(v, &f.status)
		case 5:
			return decodeFloat(v, &f.latencyMs)
		case 6:
			return decodeString(v, &f.errorClass)
		case 7:
			return decodeString(v, &f.err)
		case 8:
			return decodeInt(v, &f.concurrencyLimit)
		case 9:
			return decodeInt(v, &f.pausedForMs)
		case 10:
			return decodeBool(v, &f.test)
		case 11:
			return decodeString(v, &f.at)
		}
		return err
	})
	if err != nil && !errors.Is(err, errWrongType) {
		return errUnsure // the scanner refused it, or a key it cannot match
	}
	return err
}

// attemptDecoder reads webhooks.attempts records into attempts. Not safe for concurrent use:
// the view's goroutine owns it.
type attemptDecoder struct {
	names interner          // destination ids and error classes
	urls  map[string]string // a URL as written → as shown (schemas.RedactURL)
}

func newAttemptDecoder() *attemptDecoder {
	return &attemptDecoder{names: interner{}, urls: map[string]string{}}
}

// attempt reads one record; false for a record that cannot be read.
func (d *attemptDecoder) attempt(r *kgo.Record) (attempt, bool) {
	var f attemptFields
	switch err := decodeAttemptFields(r.Value, &f); {
	case errors.Is(err, errUnsure):
		return attemptOf(r)
	case err != nil || len(f.destinationID) == 0:
		return attempt{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, string(f.at))
	if err != nil {
		at = r.Timestamp
	}
	a := attempt{At: at.UTC(), DestinationID: d.names.get(f.destinationID), MessageID: string(f.messageID), URL: d.redacted(f.url),
		Attempt: f.attempt, Status: f.status, LatencyMs: f.latencyMs, ErrorClass: d.names.get(f.errorClass), Test: f.test}
	if len(f.err) > 0 {
		a.Error = string(f.err)
	}
	return a, true
}

// redacted is schemas.RedactURL(string(u)), remembered: a destination's URLs repeat in every
// attempt.
func (d *attemptDecoder) redacted(u []byte) string {
	if s, ok := d.urls[string(u)]; ok {
		return s
	}
	if len(d.urls) >= maxInterned {
		clear(d.urls)
	}
	s := schemas.RedactURL(string(u)) // the deliverer redacts it already
	d.urls[string(u)] = s
	return s
}

// attemptOf reads one webhooks.attempts record with schemas.DecodeAttemptRecord; false for a
// record that cannot be read.
func attemptOf(r *kgo.Record) (attempt, bool) {
	rec, err := schemas.DecodeAttemptRecord(r.Value)
	if err != nil || rec.DestinationID == "" {
		return attempt{}, false
	}
	at, err := time.Parse(time.RFC3339Nano, rec.At)
	if err != nil {
		at = r.Timestamp
	}
	return attempt{At: at.UTC(), DestinationID: rec.DestinationID, MessageID: rec.MessageID, URL: schemas.RedactURL(rec.URL), // the deliverer redacts it already
		Attempt: rec.Attempt, Status: rec.Status, LatencyMs: rec.LatencyMs, ErrorClass: string(rec.ErrorClass), Error: rec.Error, Test: rec.Test}, true
}

// statusMatches reports whether a matches the ?status= filter: success, failure, 2xx, 4xx,
// 5xx, or an error class.
func statusMatches(a *attempt, status string) bool {
	switch status {
	case "":
		return true
	case "success":
		return a.ErrorClass == successClass
	case "failure":
		return a.ErrorClass != successClass
	case "2xx", "3xx", "4xx", "5xx":
		return a.Status/100 == int(status[0]-'0')
	}
	return a.ErrorClass == status
}

var statusFilters = append([]string{"success", "failure", "2xx", "3xx", "4xx", "5xx", successClass}, failureClasses...)

// maxPage bounds a page of attempts.
const maxPage = 1000

// pageLimit reads ?limit= (default def, at most maxPage).
func pageLimit(r *http.Request, def int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxPage {
		return 0, errInvalid("limit", "limit: must be a number from 1 to %d, got %q", maxPage, v)
	}
	return n, nil
}

// destinationAttempts answers the destination's attempts, newest first: ?status= filters,
// ?cursor= (the nextCursor of the previous page) pages, ?limit= sizes a page (50).
func (s *Service) destinationAttempts(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, ok := s.deps.Store.Snapshot().DestinationByID(id); !ok {
		return errNotFound("no destination %q", id)
	}
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && !slices.Contains(statusFilters, status) {
		return errInvalid("status", "status: must be one of %v, got %q", statusFilters, status)
	}
	limit, err := pageLimit(r, 50)
	if err != nil {
		return err
	}
	var before uint64 = math.MaxUint64
	if c := q.Get("cursor"); c != "" {
		if before, err = strconv.ParseUint(c, 10, 64); err != nil {
			return errInvalid("cursor", "cursor: not a cursor of this API: %q", c)
		}
	}
	out := make([]attempt, 0, limit)
	more := false
	s.attempts.mu.RLock()
	if d := s.attempts.dests[id]; d != nil {
		for i := 1; i <= d.size; i++ {
			a := &d.ring[(d.next-i+len(d.ring))%len(d.ring)]
			if a.Seq >= before || !statusMatches(a, status) {
				continue
			}
			if len(out) == limit {
				more = true
				break
			}
			out = append(out, *a)
		}
	}
	s.attempts.mu.RUnlock()
	page := map[string]any{"data": out}
	if more {
		page["nextCursor"] = strconv.FormatUint(out[len(out)-1].Seq, 10)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// messageAttempts answers every attempt of one message the log holds, oldest first, across
// destinations, URLs and tiers.
func (s *Service) messageAttempts(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("messageId")
	out := []attempt{}
	s.attempts.mu.RLock()
	for _, d := range s.attempts.dests {
		for i := 0; i < d.size; i++ {
			if a := &d.ring[i]; a.MessageID == id {
				out = append(out, *a)
			}
		}
	}
	s.attempts.mu.RUnlock()
	if len(out) == 0 {
		return errNotFound("no attempt of message %q in the log (it keeps the last %d attempts per destination)", id, s.cfg.AttemptsPerDestination)
	}
	slices.SortFunc(out, func(a, b attempt) int { return int(a.Seq) - int(b.Seq) })
	writeData(w, http.StatusOK, out)
	return nil
}

// stats is the answer of GET /v1/destinations/{id}/stats.
type stats struct {
	Window      string            `json:"window"`
	Step        string            `json:"step"`
	Attempts    uint64            `json:"attempts"`
	Successes   uint64            `json:"successes"`
	Failures    map[string]uint64 `json:"failures"`
	SuccessRate *float64          `json:"successRate"`
	LatencyMs   latency           `json:"latencyMs"`
	Series      []point           `json:"series"`
}

type latency struct {
	P50 *float64 `json:"p50"`
	P99 *float64 `json:"p99"`
}

type point struct {
	At        time.Time `json:"at"`
	Attempts  uint64    `json:"attempts"`
	Successes uint64    `json:"successes"`
	Failures  uint64    `json:"failures"`
	LatencyMs latency   `json:"latencyMs"`
}

// quantile returns the q quantile of hist, nil when it is empty.
func quantile(hist *[histBuckets]uint64, n uint64, q float64) *float64 {
	if n == 0 {
		return nil
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for i, c := range hist {
		seen += c
		if seen >= rank {
			v := math.Round(histValue(i)*100) / 100
			return &v
		}
	}
	return nil
}

// destinationStats answers the destination's counters over ?window=1h (per minute) or 24h
// (per 10 minutes).
func (s *Service) destinationStats(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, ok := s.deps.Store.Snapshot().DestinationByID(id); !ok {
		return errNotFound("no destination %q", id)
	}
	window, step := time.Hour, time.Minute
	switch v := r.URL.Query().Get("window"); v {
	case "", "1h":
	case "24h":
		window, step = 24*time.Hour, 10*time.Minute
	default:
		return errInvalid("window", "window: must be 1h or 24h, got %q", v)
	}
	out := s.statsOf(id, window, step)
	if v := r.URL.Query().Get("window"); v != "" {
		out.Window = v
	}
	writeData(w, http.StatusOK, out)
	return nil
}

// statsOf is the destination's counters over the last window, one point per step.
func (s *Service) statsOf(id string, window, step time.Duration) stats {
	window = min(window, s.cfg.StatsWindow)
	nowMin := s.now().Unix() / 60
	firstMin := nowMin - int64(window/time.Minute) + 1
	stepMin := int64(step / time.Minute)
	firstMin -= (firstMin%stepMin + stepMin) % stepMin // points start on a step boundary
	out := stats{Window: schemas.ShortDuration(window), Step: schemas.ShortDuration(step), Failures: map[string]uint64{}}
	var total [histBuckets]uint64
	s.attempts.mu.RLock()
	d := s.attempts.dests[id]
	for start := firstMin; start <= nowMin; start += stepMin {
		p := point{At: time.Unix(start*60, 0).UTC()}
		var hist [histBuckets]uint64
		for m := start; m < start+stepMin && m <= nowMin; m++ {
			if d == nil {
				break
			}
			mm := d.minutes[int(m%int64(len(d.minutes)))]
			if mm == nil || mm.at != m {
				continue
			}
			p.Attempts += uint64(mm.attempts)
			p.Successes += uint64(mm.successes)
			for i, c := range mm.failures {
				if c > 0 {
					p.Failures += uint64(c)
					out.Failures[failureClasses[i]] += uint64(c)
				}
			}
			for i, c := range mm.hist {
				hist[i] += uint64(c)
				total[i] += uint64(c)
			}
		}
		p.LatencyMs = latency{P50: quantile(&hist, p.Attempts, 0.5), P99: quantile(&hist, p.Attempts, 0.99)}
		out.Attempts += p.Attempts
		out.Successes += p.Successes
		out.Series = append(out.Series, p)
	}
	s.attempts.mu.RUnlock()
	if out.Attempts > 0 {
		rate := math.Round(float64(out.Successes)/float64(out.Attempts)*10000) / 10000
		out.SuccessRate = &rate
	}
	out.LatencyMs = latency{P50: quantile(&total, out.Attempts, 0.5), P99: quantile(&total, out.Attempts, 0.99)}
	return out
}
