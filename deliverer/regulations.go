package deliverer

import (
	"bytes"
	"context"
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Deleted and suppressed users at egress (docs/delivery.md#deleted-and-suppressed-users).
//
// Every record is checked against the regulations (platform.Regulations: tracking.suppressions
// and tracking.deletions.status, read whole by every deliverer) where it could leave: when it
// is dispatched (first attempts, retry-tier records when due, parked records when released,
// DLQ replays), right before its POST starts (after a wait in its host's queue or for its rate
// limit), and before it is handed on to a tier or the DLQ. A record of a suppressed user, or of
// a deleted user accepted before the deletion was processed, is dropped: finished (its offset
// committed), counted in tributary_deliverer_dropped_total and logged on webhooks.attempts with
// the class Suppressed or Deleted. A delete notice is never dropped.
//
// The user is the key's part after "<destinationId>:" (docs/topics.md#webhooksdeliveries): the
// message's userId, else its anonymousId. The check is two map lookups under a read lock, and
// allocates nothing; only a deleted user's record is read further, for its acceptance time.
//
// A delete notice reaches a deliverer in the same Kafka transaction as its status record, but
// through another topic: the deliverer records the deletion the notice announces (its user,
// its first-attempt-at) as soon as it polls the notice, before it dispatches any record of
// that poll, so that nothing of the user it reads with or after the notice leaves after it.

// forgotten says why d must not be delivered: Deleted (its user was deleted after it was
// accepted), Suppressed (its user is suppressed), or "" (deliver it).
func (s *Service) forgotten(d *delivery) Class {
	return classOf(s.regs.Forgets(d.r, d.destID, d.notice || d.test))
}

// classOf is the class of a platform.Regulations.Forgets reason ("": none).
func classOf(reason string) Class {
	switch reason {
	case platform.ForgetDeleted:
		return Deleted
	case platform.ForgetSuppressed:
		return Suppressed
	}
	return ""
}

// drop finishes a record that must not be delivered (class Suppressed or Deleted): counted,
// logged on webhooks.attempts, its offset committable.
func (s *Service) drop(d *delivery, p *pending, class Class) {
	now := s.now()
	s.metrics.dropped.WithLabelValues(d.destID, string(class)).Inc()
	s.countDropped(d.r, d.destID)
	why := "user suppressed (tracking.suppressions)"
	if class == Deleted {
		why = "user deleted after the message was accepted (tracking.deletions.status)"
	}
	res := urlResult{Class: class, Err: errors.New(why)}
	// Plain and without the message's summary: nothing of a deleted or suppressed user.
	v := appendAttemptRecord(make([]byte, 0, 288), &delivery{destID: d.destID, messageID: d.messageID, attempt: d.attempt, test: d.test}, &res, hostLimit{}, outcome{}, now)
	s.cl.Produce(s.grace, &kgo.Record{Topic: s.cfg.AttemptsTopic, Key: []byte(d.destID), Value: v}, nil)
	s.track.finish(p)
}

// dropIfForgotten drops d if it must not be delivered, and says whether it did.
func (s *Service) dropIfForgotten(d *delivery, p *pending) bool {
	class := s.forgotten(d)
	if class == "" {
		return false
	}
	s.drop(d, p, class)
	return true
}

// noteNotices records the deletion announced by each delete notice among recs (records of
// webhooks.deliveries): its user, processed at its first-attempt-at (the router's clock when
// it wrote the notice), unless a later deletion of the user is known already.
func (s *Service) noteNotices(recs []*kgo.Record) {
	for _, r := range recs {
		var destID, typ, first []byte
		for _, h := range r.Headers {
			switch h.Key {
			case schemas.HeaderType:
				typ = h.Value
			case schemas.HeaderDestinationID:
				destID = h.Value
			case schemas.HeaderFirstAttemptAt:
				first = h.Value
			}
		}
		if !bytes.Equal(typ, typeDelete) {
			continue
		}
		user, ok := platform.DeliveryUser(r.Key, string(destID))
		if !ok {
			continue
		}
		at, err := schemas.ParseTimestamp(string(first))
		if err != nil {
			at = r.Timestamp
		}
		s.regs.ApplyDeletion(string(user), at)
	}
}

var typeDelete = []byte(schemas.TypeDelete)

// reports is the deliverer's part of the regulations' status (docs/console.md#regulations):
// once it applies a request (reads the router's status of it: from then on the user's
// deliveries are dropped), it writes its report, unless one was written already (read back
// from the same topic: a restart reads every status again and does not report them twice).
// While the regulations load, the statuses wait; once loaded, those not reported yet are.
type reports struct {
	mu       sync.Mutex
	loaded   bool
	reported map[string]bool // "<requestId>\n<userId>"
	waiting  []schemas.DeletionStatus
}

// onStatus is platform.RegulationsConfig.OnStatus: called by the status topic's reader.
func (s *Service) onStatus(st *schemas.DeletionStatus, rep *schemas.DeletionReport) {
	r := &s.reports
	r.mu.Lock()
	defer r.mu.Unlock()
	if rep != nil {
		if rep.Store == schemas.StoreDeliverer {
			r.reported[rep.RequestID+"\n"+rep.UserID] = true
		}
		return
	}
	if !r.loaded {
		r.waiting = append(r.waiting, *st)
		return
	}
	s.reportLocked(st)
}

// regulationsLoaded reports the statuses read while the regulations loaded that no report
// answered.
func (s *Service) regulationsLoaded() {
	r := &s.reports
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loaded = true
	for i := range r.waiting {
		s.reportLocked(&r.waiting[i])
	}
	r.waiting = nil
}

// reportLocked writes the report on st unless it was written; s.reports.mu is held. The record
// is produced without waiting (a failure is logged: the regulation then stays RUNNING until a
// restart reports it).
func (s *Service) reportLocked(st *schemas.DeletionStatus) {
	k := st.RequestID + "\n" + st.UserID
	if s.reports.reported[k] {
		return
	}
	s.reports.reported[k] = true
	rec := s.regulationReport(st.RequestID, st.UserID, st.Kind, s.droppedOf(st.UserID))
	s.cl.Produce(context.Background(), rec, func(r *kgo.Record, err error) {
		if err != nil {
			s.logger.Warn().Err(err).Str("regulation", st.RequestID).Msg("deliverer report on a regulation not written")
		}
	})
}

// droppedOf is how many of user's deliveries the deliverer dropped so far (since it started).
func (s *Service) droppedOf(user string) int64 {
	s.droppedMu.Lock()
	defer s.droppedMu.Unlock()
	return s.droppedBy[user]
}

// regulationReport is the deliverer's report on one subject of a deletion request, for
// tracking.deletions.status (a schemas.DeletionReport keyed "<requestId>/deliverer",
// docs/topics.md#trackingdeletionsstatus): it applied the request — from then on it drops the
// user's deliveries; dropped counts those it had dropped when it reported
// (schemas.CountDropped; tributary_deliverer_dropped_total counts every one). requestID is the
// request's requestId, else the id the router derived for it (<topic>-<partition>-<offset>).
func (s *Service) regulationReport(requestID, userID, kind string, dropped int64) *kgo.Record {
	rep := schemas.DeletionReport{RequestID: requestID, UserID: userID, Store: schemas.StoreDeliverer, Kind: kind,
		Counts: map[string]int64{schemas.CountDropped: dropped}, DoneAt: schemas.FormatTimestamp(s.now())}
	return &kgo.Record{Topic: s.cfg.DeletionsStatusTopic, Key: []byte(schemas.DeletionReportKey(requestID, schemas.StoreDeliverer)), Value: rep.Record()}
}

// countDropped counts a dropped delivery for its user (regulationReport).
func (s *Service) countDropped(r *kgo.Record, destID string) {
	user, ok := platform.DeliveryUser(r.Key, destID)
	if !ok {
		return
	}
	s.droppedMu.Lock()
	s.droppedBy[string(user)]++
	s.droppedMu.Unlock()
}
