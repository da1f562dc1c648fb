package views

import (
	"iter"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// The delivery log: webhooks.attempts materialised in bounded memory. Per destination it keeps
// the last perDest attempts (a Ring) and, per minute of the stats window, the count of
// attempts, successes, failures by class and a latency histogram (p50/p99).

// DeliveryAttempt is one line of webhooks.attempts (schemas.AttemptRecord) as the log keeps
// and the API answers it.
type DeliveryAttempt struct {
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
	// MessageFacts: what the record says of the message (the messages view, messages.go);
	// the log keeps its type, event and ids, not the answer.
	MessageFacts
	// Reason is why the router dropped the message for the destination, on a record of class
	// filtered: no POST, so not in the log (the health view counts it).
	Reason string `json:"reason,omitempty"`
	// Filter names the destination filter that dropped it, on a record of reason
	// destination_filter (schemas.AttemptRecord.Filter): not in the log either.
	Filter string `json:"filter,omitempty"`
}

// SuccessClass is the error class of a 2xx.
const SuccessClass = string(schemas.ClassOK)

// FilteredClass is the class of the router's record of a message it dropped for a destination
// (docs/routing.md#filtered-records): no attempt.
const FilteredClass = string(schemas.ClassFiltered)

// otherClass counts the failures of a class the console does not know (a newer deliverer's).
const otherClass = "other"

// FailureClasses are the error classes but ok (schemas.Classes, docs/delivery.md), in the order
// of the counters, then "other"; "suppressed" and "deleted" are records the deliverer dropped
// unsent because their user is suppressed or deleted
// (docs/delivery.md#deleted-and-suppressed-users). "filtered" is none: the router's record of a
// message it dropped (FilteredClass) is no attempt, and the log keeps none.
var FailureClasses = func() []string {
	out := make([]string, 0, schemas.ErrorClassCount)
	for _, c := range schemas.Classes() {
		if c != schemas.ClassOK && c != schemas.ClassFiltered {
			out = append(out, string(c))
		}
	}
	return append(out, otherClass)
}()

func classIndex(c string) int {
	if i := slices.Index(FailureClasses, c); i >= 0 {
		return i
	}
	return len(FailureClasses) - 1
}

// StatusFilters are the values of a ?status= filter of the delivery log (StatusMatches).
var StatusFilters = append([]string{"success", "failure", "2xx", "3xx", "4xx", "5xx", SuccessClass}, FailureClasses...)

// StatusMatches reports whether a matches the ?status= filter: success, failure, 2xx, 4xx,
// 5xx, or an error class.
func StatusMatches(a *DeliveryAttempt, status string) bool {
	switch status {
	case "":
		return true
	case "success":
		return a.ErrorClass == SuccessClass
	case "failure":
		return a.ErrorClass != SuccessClass
	case "2xx", "3xx", "4xx", "5xx":
		return a.Status/100 == int(status[0]-'0')
	}
	return a.ErrorClass == status
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
	failures  [schemas.ErrorClassCount]uint32 // by FailureClasses: every class but ok, then other
	hist      [histBuckets]uint32
}

// destLog is one destination's log and counters.
type destLog struct {
	ring    *Ring[DeliveryAttempt]
	minutes []*minute // by unix minute modulo len
}

// Attempts is every destination's delivery log. Safe for concurrent use.
type Attempts struct {
	mu      sync.RWMutex
	perDest int
	window  time.Duration
	dests   map[string]*destLog
	seq     uint64
	// waiters are told of new attempts of a message id (destination tests).
	waiters map[string][]chan DeliveryAttempt
}

// NewAttempts is an empty log keeping perDest attempts per destination and counters over window.
func NewAttempts(perDest int, window time.Duration) *Attempts {
	return &Attempts{perDest: perDest, window: window, dests: map[string]*destLog{}, waiters: map[string][]chan DeliveryAttempt{}}
}

// Add records attempts read, but those of a message forgotten reports (checked under the log's
// lock: a purge remembers the message ids, then takes it); it returns how many it skipped so.
func (l *Attempts) Add(batch []DeliveryAttempt, forgotten func(messageID string) bool) (skipped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range batch {
		if a.MessageID != "" && forgotten != nil && forgotten(a.MessageID) {
			skipped++
			continue
		}
		l.add(a)
	}
	return skipped
}

// add records one attempt; called with mu held. A filtered record is no attempt: skipped.
func (l *Attempts) add(a DeliveryAttempt) {
	if a.ErrorClass == FilteredClass {
		return
	}
	d := l.dests[a.DestinationID]
	if d == nil {
		d = &destLog{ring: NewRing[DeliveryAttempt](l.perDest, nil), minutes: make([]*minute, max(int(l.window/time.Minute), 1))}
		l.dests[a.DestinationID] = d
	}
	l.seq++
	a.Seq = l.seq
	a.ResponseHeaders, a.ResponseBody = nil, "" // the messages view keeps the answers
	d.ring.Push(a)

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
	if a.ErrorClass == SuccessClass {
		m.successes++
	} else {
		m.failures[classIndex(a.ErrorClass)]++
	}
	m.hist[histBucket(a.LatencyMs)]++
}

// Wait registers ch for the attempts of messageID (a send that would block is skipped); the
// returned func unregisters it.
func (l *Attempts) Wait(messageID string, ch chan DeliveryAttempt) func() {
	l.mu.Lock()
	l.waiters[messageID] = append(l.waiters[messageID], ch)
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.waiters[messageID] = slices.DeleteFunc(l.waiters[messageID], func(c chan DeliveryAttempt) bool { return c == ch })
		if len(l.waiters[messageID]) == 0 {
			delete(l.waiters, messageID)
		}
	}
}

// Page is the destination's attempts newest first, those with a Seq under before that match
// the status filter (StatusMatches), at most limit; more says there are others after them (the
// next page's before is the last one's Seq).
func (l *Attempts) Page(dest string, before uint64, status string, limit int) (page []DeliveryAttempt, more bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	d := l.dests[dest]
	if d == nil {
		return []DeliveryAttempt{}, false
	}
	return Paginate(Filter(values(d.ring.Newest()), func(a DeliveryAttempt) bool {
		return a.Seq < before && StatusMatches(&a, status)
	}), limit)
}

// values yields copies of the values seq points to.
func values[T any](seq iter.Seq[*T]) iter.Seq[T] {
	return func(yield func(T) bool) {
		for p := range seq {
			if !yield(*p) {
				return
			}
		}
	}
}

// Attempt is the destination's attempt seq, false when the log no longer holds it.
func (l *Attempts) Attempt(dest string, seq uint64) (DeliveryAttempt, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if d := l.dests[dest]; d != nil {
		for a := range d.ring.Newest() {
			if a.Seq == seq {
				return *a, true
			}
		}
	}
	return DeliveryAttempt{}, false
}

// OfMessage is every attempt of one message the log holds, oldest first, across destinations,
// URLs and tiers.
func (l *Attempts) OfMessage(id string) []DeliveryAttempt {
	out := []DeliveryAttempt{}
	l.mu.RLock()
	for _, d := range l.dests {
		for a := range d.ring.All() {
			if a.MessageID == id {
				out = append(out, *a)
			}
		}
	}
	l.mu.RUnlock()
	slices.SortFunc(out, func(a, b DeliveryAttempt) int { return int(a.Seq) - int(b.Seq) })
	return out
}

// Forget drops the attempts of messages ids (docs/console.md#what-the-console-forgets; the
// counters stay: they hold no message), and returns how many it dropped.
func (l *Attempts) Forget(ids []string) int {
	if len(ids) == 0 {
		return 0
	}
	gone := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		if id != "" {
			gone[id] = struct{}{}
		}
	}
	n := 0
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range l.dests {
		n += d.ring.Remove(func(a *DeliveryAttempt) bool { _, ok := gone[a.MessageID]; return ok })
	}
	return n
}

// Prune drops the log and counters of every destination keep returns false for.
func (l *Attempts) Prune(keep func(dest string) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.dests {
		if !keep(id) {
			delete(l.dests, id)
		}
	}
}

// Stats is the answer of GET /v1/destinations/{id}/stats.
type Stats struct {
	Window      string            `json:"window"`
	Step        string            `json:"step"`
	Attempts    uint64            `json:"attempts"`
	Successes   uint64            `json:"successes"`
	Failures    map[string]uint64 `json:"failures"`
	SuccessRate *float64          `json:"successRate"`
	LatencyMs   Latency           `json:"latencyMs"`
	Series      []Point           `json:"series"`
}

// Latency is a latency's median and 99th percentile, nil without attempts.
type Latency struct {
	P50 *float64 `json:"p50"`
	P99 *float64 `json:"p99"`
}

// Point is the counters of one step of Stats.Series.
type Point struct {
	At        time.Time `json:"at"`
	Attempts  uint64    `json:"attempts"`
	Successes uint64    `json:"successes"`
	Failures  uint64    `json:"failures"`
	LatencyMs Latency   `json:"latencyMs"`
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

// Stats is the destination's counters over the window before now (at most the log's), one
// point per step.
func (l *Attempts) Stats(id string, now time.Time, window, step time.Duration) Stats {
	window = min(window, l.window)
	nowMin := now.Unix() / 60
	firstMin := nowMin - int64(window/time.Minute) + 1
	stepMin := int64(step / time.Minute)
	firstMin -= (firstMin%stepMin + stepMin) % stepMin // points start on a step boundary
	out := Stats{Window: schemas.ShortDuration(window), Step: schemas.ShortDuration(step), Failures: map[string]uint64{}}
	var total [histBuckets]uint64
	l.mu.RLock()
	d := l.dests[id]
	for start := firstMin; start <= nowMin; start += stepMin {
		p := Point{At: time.Unix(start*60, 0).UTC()}
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
					out.Failures[FailureClasses[i]] += uint64(c)
				}
			}
			for i, c := range mm.hist {
				hist[i] += uint64(c)
				total[i] += uint64(c)
			}
		}
		p.LatencyMs = Latency{P50: quantile(&hist, p.Attempts, 0.5), P99: quantile(&hist, p.Attempts, 0.99)}
		out.Attempts += p.Attempts
		out.Successes += p.Successes
		out.Series = append(out.Series, p)
	}
	l.mu.RUnlock()
	if out.Attempts > 0 {
		rate := math.Round(float64(out.Successes)/float64(out.Attempts)*10000) / 10000
		out.SuccessRate = &rate
	}
	out.LatencyMs = Latency{P50: quantile(&total, out.Attempts, 0.5), P99: quantile(&total, out.Attempts, 0.99)}
	return out
}
