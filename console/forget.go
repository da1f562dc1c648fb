package console

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The console forgets a deleted user (docs/console.md#what-the-console-forgets). It reads the
// regulations (tracking.deletions, tracking.deletions.status) and the suppression list
// (tracking.suppressions) from their start, into a rule per user, and its views — the recent
// events and live streams, the delivery log and its attempt pages, the DLQ lists — apply it:
//
//   - a deletion (DELETE_ONLY, SUPPRESS_WITH_DELETE) at T forgets every entry of the user
//     received before T. T is the request's requestedAt as soon as the request is read, then
//     the router's processedAt once its status is read;
//   - a suppression (SUPPRESS_WITH_DELETE, SUPPRESS_ONLY) hides the user's entries received
//     from then until an UNSUPPRESS (or the tombstone on tracking.suppressions).
//
// When a rule changes, the views drop the user's entries it hides at once (a purge); an entry
// arriving later (read live, or read back when the console starts) is dropped before a view
// keeps it. The views start reading only once this list was read to its end, so nothing of a
// deleted user is shown after a restart, not even for a moment.
//
// The user is the userId a regulation names: an entry is the user's when its message's userId
// is that id, or, for a message without a userId, its anonymousId — what the records of
// tracking.events and webhooks.dlq are keyed by, so that the views read no message to tell
// (a rejected message is read for it). The delivery log's attempts carry no user: they are
// forgotten by the message ids of the events and dead letters forgotten. A regulation's
// sourceIds do not narrow what the console forgets: it forgets the user in every source's views.

// suppressMark is the start (on) or the end of a suppression, at a time.
type suppressMark struct {
	at time.Time
	on bool
}

// userRule is what the console forgets of one user.
type userRule struct {
	// deletedBefore: the user's entries received before it are forgotten.
	deletedBefore time.Time
	// marks are the user's suppressions and their ends, by time.
	marks []suppressMark
}

// hides reports whether the rule hides an entry of the user received at t.
func (u *userRule) hides(t time.Time) bool {
	if t.Before(u.deletedBefore) {
		return true
	}
	on := false
	for _, m := range u.marks {
		if m.at.After(t) {
			break
		}
		on = m.on
	}
	return on
}

// mark adds a suppression mark, once; of marks at the same time, the one read last counts.
func (u *userRule) mark(at time.Time, on bool) {
	i := sort.Search(len(u.marks), func(j int) bool { return u.marks[j].at.After(at) })
	if i > 0 && u.marks[i-1].at.Equal(at) && u.marks[i-1].on == on {
		return // read twice
	}
	u.marks = slices.Insert(u.marks, i, suppressMark{at: at, on: on})
}

// maxForgottenMessages bounds the message ids of forgotten entries the console remembers (to
// drop the delivery log's attempts of those messages, read later): the oldest go first.
const maxForgottenMessages = 100_000

// forgetting is the users the console forgets, and the message ids of their forgotten events.
// Safe for concurrent use. Its lock is taken last: a view takes it while it holds its own.
type forgetting struct {
	mu    sync.RWMutex
	users map[string]*userRule
	// requests is, per regulation id, whether each subject's purge at the router's time was
	// done (forgotten).
	requests map[string]map[string]bool
	// reported is the subjects ("<requestId>\n<userId>") whose console report the console
	// has read back from tracking.deletions.status: it does not write them again.
	reported map[string]bool
	// messages are the message ids of forgotten events; order bounds them (a ring).
	messages map[string]struct{}
	order    []string
	next     int

	ruled     atomic.Int64 // len(users): the views skip every check while it is 0
	forgotten atomic.Int64 // len(messages)
	ready     chan struct{}
}

func newForgetting() *forgetting {
	return &forgetting{users: map[string]*userRule{}, requests: map[string]map[string]bool{}, reported: map[string]bool{}, messages: map[string]struct{}{}, ready: make(chan struct{})}
}

func (f *forgetting) user(id string) *userRule {
	u := f.users[id]
	if u == nil {
		u = &userRule{}
		f.users[id] = u
		f.ruled.Store(int64(len(f.users)))
	}
	return u
}

// hides reports whether the console forgets user's entry received at t.
func (f *forgetting) hides(user string, t time.Time) bool {
	if f.ruled.Load() == 0 || user == "" {
		return false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	u := f.users[user]
	return u != nil && u.hides(t)
}

// forgetMessages remembers the message ids of forgotten entries.
func (f *forgetting) forgetMessages(ids []string) {
	if len(ids) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		if _, ok := f.messages[id]; ok || id == "" {
			continue
		}
		if len(f.order) < maxForgottenMessages {
			f.order = append(f.order, id)
		} else {
			delete(f.messages, f.order[f.next])
			f.order[f.next] = id
			f.next = (f.next + 1) % len(f.order)
		}
		f.messages[id] = struct{}{}
	}
	f.forgotten.Store(int64(len(f.messages)))
}

// messageForgotten reports whether message id is of a forgotten entry.
func (f *forgetting) messageForgotten(id string) bool {
	if f.forgotten.Load() == 0 {
		return false
	}
	f.mu.RLock()
	_, ok := f.messages[id]
	f.mu.RUnlock()
	return ok
}

// forgottenRequest reports whether the views forgot every subject of regulation id as the
// router processed it: for each subject, its tracking.deletions.status record was read and the
// views dropped the entries it hides. False for a regulation the console has no status of yet.
func (f *forgetting) forgottenRequest(id string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	subjects := f.requests[id]
	if len(subjects) == 0 {
		return false
	}
	for _, done := range subjects {
		if !done {
			return false
		}
	}
	return true
}

// Forgotten reports whether the console's views forgot every subject of regulation
// requestID as the router processed it (docs/console.md#what-the-console-forgets): each
// subject's tracking.deletions.status record was read, and the recent events, live streams,
// delivery log and DLQ lists no longer hold an entry the regulation hides. Safe for concurrent
// use.
func (s *Service) Forgotten(requestID string) bool { return s.forget.forgottenRequest(requestID) }

// statusDone is a subject of a regulation whose status was read: forgotten once the purge
// after it ran.
type statusDone struct{ request, user, kind string }

// applyRegulation reads one record of tracking.deletions, tracking.deletions.status or
// tracking.suppressions into the rules; it returns the user whose rule changed ("" for none)
// and, for a status, the subject to mark forgotten after the purge.
func (f *forgetting) applyRegulation(r *kgo.Record, topics *Config) (string, *statusDone) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.Topic {
	case topics.DeletionsTopic:
		req, at, err := schemas.DecodeDeletionRequest(r.Value)
		if err != nil {
			return "", nil // the router skips it too
		}
		if at.IsZero() {
			at = r.Timestamp
		}
		id := req.RequestID
		if id == "" { // as the router derives it
			id = r.Topic + "-" + strconv.Itoa(int(r.Partition)) + "-" + strconv.FormatInt(r.Offset, 10)
		}
		if f.requests[id] == nil {
			f.requests[id] = map[string]bool{}
		}
		if _, ok := f.requests[id][req.UserID]; !ok {
			f.requests[id][req.UserID] = false
		}
		f.rule(req.UserID, req.Kind, at)
		return req.UserID, nil
	case topics.DeletionsStatusTopic:
		rep, st, err := schemas.DecodeDeletionStatusRecord(r.Value)
		if err != nil {
			return "", nil
		}
		if st == nil { // another store's report (docs/console.md#regulations): no rule in it
			if rep.Store == schemas.StoreConsole {
				f.reported[rep.RequestID+"\n"+rep.UserID] = true
			}
			return "", nil
		}
		if schemas.CheckSubjectID(st.UserID) != nil {
			return "", nil
		}
		at, err := schemas.ParseTimestamp(st.ProcessedAt)
		if err != nil {
			at = r.Timestamp
		}
		if f.requests[st.RequestID] == nil {
			f.requests[st.RequestID] = map[string]bool{}
		}
		if _, ok := f.requests[st.RequestID][st.UserID]; !ok {
			f.requests[st.RequestID][st.UserID] = false
		}
		f.rule(st.UserID, st.Kind, at)
		return st.UserID, &statusDone{request: st.RequestID, user: st.UserID, kind: st.Kind}
	default: // tracking.suppressions: key userId, a tombstone lifts the suppression
		user := string(r.Key)
		if schemas.CheckSubjectID(user) != nil {
			return "", nil
		}
		if r.Value == nil {
			f.user(user).mark(r.Timestamp, false)
			return user, nil
		}
		at := r.Timestamp
		var sup schemas.Suppression
		if err := json.Unmarshal(r.Value, &sup); err == nil {
			if t, err := schemas.ParseTimestamp(sup.SuppressedAt); err == nil {
				at = t
			}
		}
		f.user(user).mark(at, true)
		return user, nil
	}
}

// rule applies a regulation of kind for user at at; called with mu held.
func (f *forgetting) rule(user, kind string, at time.Time) {
	u := f.user(user)
	if (kind == schemas.KindDeleteOnly || kind == schemas.KindSuppressWithDelete || kind == "") && at.After(u.deletedBefore) {
		u.deletedBefore = at
	}
	switch kind {
	case schemas.KindSuppressWithDelete, schemas.KindSuppressOnly:
		u.mark(at, true)
	case schemas.KindUnsuppress:
		u.mark(at, false)
	}
}

// done marks the subjects whose purge ran, and returns those the console has not reported
// on yet.
func (f *forgetting) done(subjects []statusDone) []statusDone {
	if len(subjects) == 0 {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var report []statusDone
	for _, d := range subjects {
		f.requests[d.request][d.user] = true
		if k := d.request + "\n" + d.user; !f.reported[k] {
			f.reported[k] = true
			report = append(report, d)
		}
	}
	return report
}

// runForget keeps the rules: the regulation topics and the suppression list from their start;
// after each poll it purges the views of the users whose rule changed.
func (s *Service) runForget(ctx context.Context) error {
	changed := map[string]struct{}{}
	var statuses []statusDone
	return s.runView(ctx, "forget", s.forget.ready, platform.TopicReaderConfig{
		Topics: []string{s.cfg.DeletionsTopic, s.cfg.DeletionsStatusTopic, s.cfg.SuppressionsTopic},
		Apply: func(r *kgo.Record) {
			user, st := s.forget.applyRegulation(r, &s.cfg)
			if user != "" {
				changed[user] = struct{}{}
			}
			if st != nil {
				statuses = append(statuses, *st)
			}
		},
	}, func() {
		if len(changed) == 0 {
			return
		}
		purged := s.purge(changed)
		// The console's report on each subject, once its views forgot it: a regulation
		// waits for it when "console" is in CONSOLE_REGULATION_STORES.
		for _, d := range s.forget.done(statuses) {
			if err := s.reportRegulation(ctx, d.request, d.user, d.kind, int64(purged)); err != nil {
				s.logger.Warn().Err(err).Str("regulation", d.request).Msg("console report on a regulation not written")
			}
		}
		clear(changed)
		statuses = statuses[:0]
	})
}

// purge drops from every view the entries of users their rules hide, counts them, and
// returns how many it dropped.
func (s *Service) purge(users map[string]struct{}) int {
	f := s.forget
	start := time.Now()
	// hides: the user's rule hides what was received at at.
	hides := func(user string, at time.Time) bool {
		_, ok := users[user]
		return ok && f.hides(user, at)
	}
	// The recent events (and so the bodies of the attempt pages); the live streams' pages
	// remove them.
	ids, events := s.events.Forget(hides)
	// The DLQ lists.
	deadIDs, dead := s.dlq.Forget(hides)
	ids = append(ids, deadIDs...)
	// The pending retries.
	pendingIDs, pending := s.pending.Forget(hides)
	ids = append(ids, pendingIDs...)
	s.metrics.forgotten.WithLabelValues("pending").Add(float64(pending))
	// The messages view: by their user, which its attempt records name.
	ids = append(ids, s.messages.ForgetUsers(hides)...)
	f.forgetMessages(ids)
	// The delivery log: the attempts of those messages.
	attempts := s.dropAttempts(ids)
	s.metrics.purges.Inc()
	s.metrics.forgotten.WithLabelValues("events").Add(float64(events))
	s.metrics.forgotten.WithLabelValues("dlq").Add(float64(dead))
	ev := s.logger.Debug()
	if events+dead+pending+attempts > 0 {
		ev = s.logger.Info()
	}
	ev.Int("users", len(users)).Int("events", events).Int("dead_letters", dead).Int("pending", pending).Int("attempts", attempts).
		Dur("took", time.Since(start)).Msg("views purged of deleted or suppressed users")
	return events + dead + pending + attempts
}

// dropAttempts drops the delivery log's attempts of messages ids (and those messages from the
// messages view), and counts the attempts.
func (s *Service) dropAttempts(ids []string) int {
	if len(ids) == 0 {
		return 0
	}
	s.messages.Forget(ids)
	n := s.attempts.Forget(ids)
	s.health.Forget(ids) // the message ids it shows: its counters hold none
	s.metrics.forgotten.WithLabelValues("attempts").Add(float64(n))
	return n
}

// messageForgotten reports whether the console forgets the attempt a: its message was
// forgotten, or its record names a user (userId, else anonymousId) whose rule hides what was
// received when its message was (else when it was attempted).
func (s *Service) messageForgotten(a *views.DeliveryAttempt) bool {
	if s.forget.messageForgotten(a.MessageID) {
		return true
	}
	user := a.UserID
	if user == "" {
		user = a.AnonymousID
	}
	if user == "" || s.forget.ruled.Load() == 0 {
		return false
	}
	at := a.ReceivedAt
	if at.IsZero() {
		at = a.At
	}
	return s.forget.hides(user, at)
}

// waitReady waits for every channel; false when ctx ended first.
func waitReady(ctx context.Context, chs ...<-chan struct{}) bool {
	for _, ch := range chs {
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
	return true
}
