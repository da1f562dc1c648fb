package deliverer

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// Admission and attempts: what happens to a record once it is read (docs/delivery.md#isolation-a-dead-endpoint-does-not-hold-back-the-others).

// delivery is what a record's headers say.
type delivery struct {
	r              *kgo.Record
	body           []byte     // the body to POST: r's value, opened when it is sealed (openBody)
	key            *shred.Key // the data key of a sealed r (openBody); nil: plain
	destID         string
	messageID      string
	attempt        int
	deferrals      int // times sent to a tier unsent
	firstAttemptAt time.Time
	url            string    // header url: this URL only, instead of the destination's webhooks
	test           bool      // header test: a test delivery (dispatchTest)
	notice         bool      // header type is delete: a delete notice, never dropped (regulations.go)
	dueAt          time.Time // header due-at: when a tier record comes due
	retryNow       string    // header retry-now: a retry-now copy of that tier record (retrynow.go)
	replay         string    // header replay: the replay that produced it (docs/delivery.md#replay)
	msgType        string    // header type

	// What the attempt records say of the message, read from the opened body once per attempt
	// (summarize).
	sum        schemas.BodySummary
	summarized bool
}

// summarize reads what the attempt log says of the message from its opened body
// (schemas.SummarizeBody: the members before properties, no decoding).
func (d *delivery) summarize() {
	if !d.summarized {
		d.sum, d.summarized = schemas.SummarizeBody(d.body), true
	}
}

func parseDelivery(r *kgo.Record, now time.Time) delivery {
	d := delivery{r: r, body: r.Value, attempt: 1, firstAttemptAt: now}
	for _, h := range r.Headers {
		switch h.Key {
		case schemas.HeaderDestinationID:
			d.destID = string(h.Value)
		case schemas.HeaderMessageID:
			d.messageID = string(h.Value)
		case schemas.HeaderAttempt:
			if n, err := strconv.Atoi(string(h.Value)); err == nil && n > 0 {
				d.attempt = n
			}
		case schemas.HeaderDeferrals:
			if n, err := strconv.Atoi(string(h.Value)); err == nil && n > 0 {
				d.deferrals = n
			}
		case schemas.HeaderFirstAttemptAt:
			if t, err := schemas.ParseTimestamp(string(h.Value)); err == nil {
				d.firstAttemptAt = t
			}
		case schemas.HeaderURL:
			d.url = string(h.Value)
		case schemas.HeaderTest:
			d.test = string(h.Value) == "1" || string(h.Value) == "true"
		case schemas.HeaderType:
			d.notice = string(h.Value) == schemas.TypeDelete
			d.msgType = string(h.Value)
		case schemas.HeaderDueAt:
			d.dueAt, _ = schemas.ParseTimestamp(string(h.Value))
		case schemas.HeaderRetryNow:
			d.retryNow = string(h.Value)
		case schemas.HeaderReplay:
			d.replay = string(h.Value)
		}
	}
	return d
}

// request is what one attempt of d sends to entries of dest, with the event's trace context
// (headers traceparent, tracestate: every POST of the delivery carries it,
// docs/receivers.md#headers). The context is read from the record's headers here, not kept in
// the delivery: a delivery is copied and held many times on its way, a request once.
func (s *Service) request(d *delivery, dest *schemas.Destination, entries []schemas.Webhook) *request {
	return &request{dest: dest, entries: entries, messageID: d.messageID, body: d.body,
		trace: platform.TraceFromRecord(d.r), tracer: s.deps.Tracer, attempt: d.attempt}
}

// dispatch decides a record: DLQ at once (destination gone, window over), a delivery attempt,
// a wait in its host's queue (host at its in-flight bound), or a retry tier unsent (queue full
// or breaker open). It blocks only on the global bound (MaxInFlight), whose token the record
// holds until its attempt ends or it is handed on.
func (s *Service) dispatch(ctx context.Context, r *kgo.Record, p *pending) {
	if !s.awaitProducer(ctx) {
		return // not finished: delivered again after a restart
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return // not finished: delivered again after a restart
	}
	now := s.now()
	d := parseDelivery(r, now)
	dest, ok := s.deps.Config().DestinationByID(d.destID)
	// A user's records to an ordered destination go one at a time (ordering.go).
	if ok && dest.Settings.OrderedPerUser() && !d.test && d.retryNow == "" && s.orderedHold(ctx, &d, p) {
		return
	}
	// A tier record a retry-now delivered is finished unsent (retrynow.go).
	if s.isTier[r.Topic] && s.tierRecordRetried(ctx, &d, p) {
		return
	}
	// The regulations first (a map lookup), then the body is opened: a shredded key drops it too.
	if s.dropIfForgotten(&d, p) || !s.openBody(&d, p) {
		<-s.sem
		return
	}
	if d.test {
		s.dispatchTest(ctx, d, p, dest, ok)
		return
	}
	if d.retryNow != "" && !s.isTier[r.Topic] {
		s.dispatchRetryNow(ctx, d, p, dest, ok)
		return
	}
	if ok && dest.IsAutoDisabled() {
		s.toParked(d, p) // kept until it is enabled again (autodisable.go)
		<-s.sem
		return
	}
	if !ok || !dest.IsEnabled() {
		why := "destination deleted"
		if ok {
			why = "destination disabled"
		}
		s.toDLQ(d, p, string(Unavailable), 0, why)
		<-s.sem
		return
	}
	if now.After(d.firstAttemptAt.Add(s.cfg.RetryWindow)) {
		s.toDLQ(d, p, "retry_window_expired", 0, "no attempt may start more than RETRY_WINDOW after the first")
		<-s.sem
		return
	}
	if d.url != "" {
		if err := schemas.CheckWebhookURL(d.url); err != nil {
			s.toDLQ(d, p, string(InvalidURL), 0, "header "+schemas.HeaderURL+": "+err.Error())
			<-s.sem
			return
		}
		dest = withURL(dest, d.url)
	}
	if d.replay != "" {
		dest = withReplay(dest, d.replay)
	}
	// A messageId no request may carry is refused before it takes a host slot: it would fail
	// on every URL, and the hosts' limits and breakers are for what the endpoints say
	// (docs/delivery.md#outcome-one-function-decides). Ingest refuses such ids; other
	// producers may not.
	if err := schemas.CheckMessageID(d.messageID); err != nil {
		s.toDLQ(d, p, string(InvalidRequest), 0, string(InvalidRequest)+": messageId "+err.Error())
		<-s.sem
		return
	}
	admitted, busy, reason, wait := s.admit(dest, "", now)
	refuse := func(reason string, wait time.Duration) {
		// A retry-tier record behind an open breaker or a pause waits for its endpoint in
		// memory (park.go); any other is handed on to a tier unsent.
		if !s.park(d, p, dest, reason, s.now()) {
			s.deferTo(d, p, reason, wait)
		}
		<-s.sem
	}
	if len(admitted) > 0 {
		s.launch(ctx, d, p, dest, admitted)
		return
	}
	if busy != "" {
		w := waiter{
			start: func() task { // in a delivery goroutine (hosts.spawn, releaseInto), holding a slot on busy
				more, _, _, _ := s.admit(dest, busy, s.now())
				defer func() { <-s.sem }()
				return s.attempt(ctx, d, p, dest, append(more, webhooksOf(dest, busy)...))
			},
			refuse: refuse,
		}
		for {
			res, why, pause, freed := s.hosts.enqueue(busy, w, s.now())
			switch res {
			case queued:
				s.metrics.queued.WithLabelValues(d.destID).Inc()
				return
			case full:
				// A fast host with a full queue: the poll loop waits for room (backpressure: it
				// polls no more meanwhile), and asks again at least every maxHold, in case the
				// host stalled or turned slow.
				s.metrics.heldBack.Inc()
				t := time.NewTimer(maxHold)
				select {
				case <-freed:
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					<-s.sem
					return // not finished: delivered again after a restart
				}
				t.Stop()
				continue
			}
			reason, wait = why, max(wait, pause)
			break
		}
	}
	refuse(reason, wait)
}

// openBody opens a sealed body (docs/security.md#crypto-shredding) into d.body, and says
// whether the delivery goes on. A body whose key was shredded is dropped as deleted; one whose
// keys could not be read now waits on a retry tier; one that does not open is dead-lettered.
// The record itself stays sealed: tiers and the DLQ get it as it is, headers kept.
func (s *Service) openBody(d *delivery, p *pending) bool {
	hexID := shred.KeyOf(d.r)
	if hexID == nil {
		return true
	}
	key, err := s.keys.Key(hexID)
	var body []byte
	if err == nil {
		body, err = key.Open(nil, d.r.Value)
	}
	switch {
	case err == nil:
		d.body, d.key = body, key
		return true
	case errors.Is(err, shred.ErrShredded):
		s.dropDeleted(*d, p)
	case errors.Is(err, shred.ErrUnavailable):
		s.logger.Warn().Err(err).Str("destination", d.destID).Str("message_id", d.messageID).Msg("the data keys cannot be read: the delivery waits on a retry tier")
		s.deferTo(*d, p, "keys_unavailable", 0)
	default:
		s.toDLQ(*d, p, string(InvalidRequest), 0, string(InvalidRequest)+": the sealed body: "+err.Error())
	}
	return false
}

// errDeleted is the error of the attempt-log line of a dropped delivery of a deleted user.
var errDeleted = errors.New("its user was deleted: the data key of the body was shredded")

// dropDeleted drops a delivery whose user was deleted (its data key shredded): nothing is
// sent, it is not retried nor dead-lettered; one attempt-log line with errorClass "deleted"
// says so.
func (s *Service) dropDeleted(d delivery, p *pending) {
	now := s.now()
	s.metrics.dropped.WithLabelValues(d.destID, string(Deleted)).Inc()
	s.countDropped(d.r, d.destID)
	// Plain and without the message's summary: the body did not open, or must not be read.
	v := appendAttemptRecord(make([]byte, 0, 288), &delivery{destID: d.destID, messageID: d.messageID, attempt: d.attempt, test: d.test}, &urlResult{Class: Deleted, Err: errDeleted}, hostLimit{}, outcome{}, now)
	s.cl.Produce(s.grace, &kgo.Record{Topic: s.cfg.AttemptsTopic, Key: []byte(d.destID), Value: v}, nil)
	s.track.finish(p)
}

// producerBackpressure is how many records (attempt log, tiers, dead letters) may wait in the
// deliverer's producer before the poll loop stops dispatching: every POST ends with its
// attempt record, so delivering faster than the broker takes those records only piles up
// goroutines blocked in Produce, each holding its record and its stack (thousands of them, and
// hundreds of megabytes, when the machine was saturated). Half the producer's buffer
// (kgo.MaxBufferedRecords in New).
const producerBackpressure = 2000

// awaitProducer waits, polling no more meanwhile, until the producer's buffer is under
// producerBackpressure; false if ctx ended first.
func (s *Service) awaitProducer(ctx context.Context) bool {
	for wait := 100 * time.Microsecond; s.cl.BufferedProduceRecords() >= producerBackpressure; wait = min(2*wait, 10*time.Millisecond) {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	return true
}

// dispatchTest runs a test delivery (header test: the console's event tester): one POST to
// every URL of the destination (or to the url header's), at once, whatever the destination's
// hosts' limits, queues, pauses, breakers and rate limit, and without feeding them; each POST
// is logged on webhooks.attempts with "test":true and counted in the attempt metrics. It is
// never retried nor dead-lettered: a destination that is gone or a bad url header only drops
// it, with a warning. A disabled destination is tested too (testing comes before enabling).
// It holds the global token (s.sem) until its POSTs end.
func (s *Service) dispatchTest(ctx context.Context, d delivery, p *pending, dest *schemas.Destination, ok bool) {
	why := ""
	switch {
	case !ok:
		why = "destination deleted"
	case d.url != "" && schemas.CheckWebhookURL(d.url) != nil:
		why = "header " + schemas.HeaderURL + ": " + schemas.CheckWebhookURL(d.url).Error()
	}
	if why != "" {
		s.logger.Warn().Str("destination", d.destID).Str("message_id", d.messageID).Str("reason", why).Msg("test delivery dropped")
		s.track.finish(p)
		<-s.sem
		return
	}
	if d.url != "" {
		dest = withURL(dest, d.url)
	}
	s.spawn(func() {
		defer func() { <-s.sem }()
		if ctx.Err() != nil {
			return // shutting down: not finished, delivered again after a restart
		}
		results := post(s.grace, s.client, s.cfg.Timeout, s.request(&d, dest, dest.Settings.Webhooks), s.now())
		now := s.now()
		d.summarize()
		for i := range results {
			s.logAttempt(&d, &results[i], s.hosts.limit(unitOf(dest, results[i].URL), now), outcome{}, now)
			results[i].answer.release()
		}
		s.track.finish(p)
	})
}

// withURL is dest with url as its only webhook (a delivery with the url header: a dead letter
// replayed to another URL), with the static headers of dest's first webhook entry. Everything
// else (secrets, pacing, limits) is dest's.
func withURL(dest *schemas.Destination, url string) *schemas.Destination {
	c := *dest
	var headers map[string]string
	if len(dest.Settings.Webhooks) > 0 {
		headers = dest.Settings.Webhooks[0].Headers
	}
	c.Settings.Webhooks = []schemas.Webhook{{URL: url, Headers: headers}}
	return &c
}

// withReplay is dest with the header X-Tributary-Replay: id added to each webhook entry's
// static headers (docs/receivers.md#headers): a replayed delivery (docs/delivery.md#replay).
// A value no request may carry fails as a static header's would (invalid_request).
func withReplay(dest *schemas.Destination, id string) *schemas.Destination {
	c := *dest
	c.Settings.Webhooks = make([]schemas.Webhook, len(dest.Settings.Webhooks))
	for i, e := range dest.Settings.Webhooks {
		h := make(map[string]string, len(e.Headers)+1)
		for k, v := range e.Headers {
			h[k] = v
		}
		h[schemas.HeaderXTributaryReplay] = id
		e.Headers = h
		c.Settings.Webhooks[i] = e
	}
	return &c
}

// admit takes a slot on each URL's host that has one (skipping the host `holding`, whose slot
// the caller already holds). It returns the admitted entries, a host that refused only for
// being at its bound (to queue on), and the other refusal's reason and breaker wait.
func (s *Service) admit(dest *schemas.Destination, holding string, now time.Time) (admitted []schemas.Webhook, busy, reason string, wait time.Duration) {
	for _, e := range dest.Settings.Webhooks {
		host := unitOf(dest, e.URL)
		if host == holding {
			continue
		}
		ok, why, w := s.hosts.acquire(host, dest.Settings.MaxConcurrency, now)
		switch {
		case ok:
			admitted = append(admitted, e)
		case why == refusedBusy && busy == "":
			busy = host
		default:
			reason, wait = why, max(wait, w)
		}
	}
	return admitted, busy, reason, wait
}

// unitOf is the key of the isolation unit (limit, queue, pause, breaker: hosts) of a
// destination's URL: its host, shared by every destination on it; or, for a destination with
// maxConcurrency, the destination's own share of the host, so that its cap binds it alone.
func unitOf(dest *schemas.Destination, url string) string {
	if dest.Settings.MaxConcurrency > 0 {
		return hostOf(url) + " " + dest.ID
	}
	return hostOf(url)
}

// webhooksOf returns the destination's entries on host (a unitOf key).
func webhooksOf(dest *schemas.Destination, host string) []schemas.Webhook {
	var out []schemas.Webhook
	for _, e := range dest.Settings.Webhooks {
		if unitOf(dest, e.URL) == host {
			out = append(out, e)
		}
	}
	return out
}

// launch runs one attempt in a goroutine Run waits for; the global token is released when it
// ends.
func (s *Service) launch(ctx context.Context, d delivery, p *pending, dest *schemas.Destination, entries []schemas.Webhook) {
	s.spawnTask(func() task {
		defer func() { <-s.sem }()
		return s.attempt(ctx, d, p, dest, entries)
	})
}

// attempt makes one delivery attempt and hands the record on according to its verdict. An
// attempt that has not started its POST when ctx is done (it waited for a host slot or the
// rate limit) does not start it: the record stays unfinished and is delivered again after a
// restart. It returns the waiter its POST's end let in (hosts.releaseInto), for its goroutine to
// run next.
func (s *Service) attempt(ctx context.Context, d delivery, p *pending, dest *schemas.Destination, entries []schemas.Webhook) (next task) {
	var err error
	if lim := s.limiter(dest); lim != nil {
		err = lim.Wait(ctx)
	}
	if err != nil || ctx.Err() != nil {
		for _, e := range entries {
			s.hosts.release(unitOf(dest, e.URL), hostUnknown, signalNone, 0, 0, s.now())
		}
		return nil // shutting down: not finished
	}
	// A user deleted since the record was read (its key shredded while it waited for a slot or
	// the rate limit) gets nothing: one flag read right before the POST.
	if d.key != nil && !d.key.Live() {
		for _, e := range entries {
			s.hosts.release(unitOf(dest, e.URL), hostUnknown, signalNone, 0, 0, s.now())
		}
		s.dropDeleted(d, p)
		return nil
	}
	if class := s.forgotten(&d); class != "" {
		for _, e := range entries {
			s.hosts.release(unitOf(dest, e.URL), hostUnknown, signalNone, 0, 0, s.now())
		}
		s.drop(&d, p, class)
		return nil
	}
	// A POST in progress finishes even when shutdown starts: it is bounded by DELIVERY_TIMEOUT
	// and by the shutdown deadline (s.grace).
	results := post(s.grace, s.client, s.cfg.Timeout, s.request(&d, dest, entries), s.now())
	now := s.now()
	class, retryAfter, last := verdict(results)
	status := 0
	errText := ""
	host := ""
	if last != nil {
		status = last.Status
		if class != Success { // the text is for a failure's log, tier and dead letter only
			errText = describe(last)
		}
		host = last.Host
	}
	// What becomes of the delivery is decided first: its attempt records say it
	// (nextAttemptAt, deadLettered).
	var out outcome
	tier := -1
	switch {
	case class == Success:
	case class.Retryable():
		if d.attempt > len(s.cfg.RetrySchedule) {
			out.deadLettered = "retries_exhausted"
			break
		}
		tier = s.tierFor(max(s.cfg.RetrySchedule[d.attempt-1], retryAfter))
		if now.Add(s.tierDelays[tier]).After(d.firstAttemptAt.Add(s.cfg.RetryWindow)) {
			out.deadLettered, tier = "retry_window_expired", -1
			break
		}
		out.nextAttemptAt = now.Add(s.tierDelays[tier])
	default:
		out.deadLettered = string(class)
	}
	d.summarize()
	for i := range results {
		res := &results[i]
		unit := unitOf(dest, res.URL)
		lim := s.hosts.releaseInto(&next, unit, outcomeOf(res.Class), signalOf(res), res.Latency, res.RetryAfter, now)
		s.logAttempt(&d, res, lim, out, now)
		res.answer.release()
	}
	switch {
	case class == Success:
		s.metrics.forDestination(d.destID).delivered.Inc()
		s.metrics.endToEnd.Observe(now.Sub(d.firstAttemptAt).Seconds())
		s.track.finish(p)
		s.flog.delivered(d.destID, host, now)
		s.streaks.delivered(d.destID)
	case tier >= 0:
		s.streaks.failed(d.destID, now)
		s.flog.failed(d.destID, host, status, errText, d.firstAttemptAt, out.nextAttemptAt, now)
		s.toTier(d, p, d.attempt+1, tier, errText, status)
	default:
		s.flog.failed(d.destID, host, status, errText, d.firstAttemptAt, time.Time{}, now)
		s.streaks.failed(d.destID, now)
		s.toDLQ(d, p, out.deadLettered, status, errText)
	}
	return next
}

type destLimiter struct {
	rps float64
	lim *rate.Limiter
}

// limiter returns the rate limiter of a destination with maxRequestsPerSecond, or nil.
func (s *Service) limiter(dest *schemas.Destination) *rate.Limiter {
	rps := dest.Settings.MaxRequestsPerSecond
	if rps <= 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.limiters[dest.ID]
	if l == nil || l.rps != rps {
		l = &destLimiter{rps: rps, lim: rate.NewLimiter(rate.Limit(rps), max(1, int(rps)))}
		s.limiters[dest.ID] = l
	}
	return l.lim
}
