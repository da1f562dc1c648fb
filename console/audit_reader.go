package console

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The audit trail's reader: tributary.audit into an auditView, the last AuditWindow records in
// memory, for GET /v1/audit and the /audit page. At start the console reads back the last
// AuditWindow records. The export (audit_api.go) reads the topic itself, not this window.

// runAudit creates tributary.audit when it is missing (an upgrade whose topic bootstrap has
// not run yet: with the default retention, RetentionAudit), then keeps the audit view: the
// topic's last AuditWindow records, then as written.
func (s *Service) runAudit(ctx context.Context) error {
	spec := platform.AuditTopic(0)
	spec.Name = s.cfg.AuditTopic
	if err := platform.EnsureTopics(ctx, s.adm, s.deps.Kafka.ReplicationFactor, []platform.TopicSpec{spec}); err != nil && ctx.Err() == nil {
		// Without the right to create topics (the topic bootstrap made it), the rest works.
		s.logger.Warn().Err(err).Msg("audit trail: ensuring its topic")
	}
	var batch []auditEntry
	return s.runView(ctx, "audit", s.auditTrail.ready, platform.TopicReaderConfig{
		Topic: s.cfg.AuditTopic, Start: platform.StartLast(int64(s.cfg.AuditWindow)),
		Apply: func(r *kgo.Record) {
			a, err := schemas.DecodeAuditRecord(r.Value)
			if err != nil {
				s.logger.Warn().Err(err).Str("topic", r.Topic).Int64("offset", r.Offset).Msg("skipping an audit record that does not decode")
				return
			}
			batch = append(batch, auditEntry{offset: r.Offset, rec: a})
		},
	}, func() {
		if len(batch) > 0 {
			s.auditTrail.view.add(batch)
			clear(batch)
			batch = batch[:0]
		}
	})
}

// auditEntry is a record of the view and its offset (the API's cursor).
type auditEntry struct {
	offset int64
	rec    schemas.AuditRecord
	at     time.Time // rec.Time, parsed
}

// auditView is the last max records of tributary.audit, oldest first. Safe for concurrent use.
type auditView struct {
	mu      sync.RWMutex
	max     int
	entries []auditEntry
}

func newAuditView(max int) *auditView { return &auditView{max: max} }

// add appends entries (in offset order), dropping the oldest beyond max.
func (v *auditView) add(entries []auditEntry) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, e := range entries {
		e.at, _ = schemas.ParseTimestamp(e.rec.Time)
		v.entries = append(v.entries, e)
	}
	if n := len(v.entries) - v.max; n > 0 {
		v.entries = append(v.entries[:0:0], v.entries[n:]...)
	}
}

// auditFilter selects records: each set field must match.
type auditFilter struct {
	// Actor is the actor's name (case-insensitive).
	Actor string
	// Action is an action ("source.create"), or a prefix ending with a dot ("source.").
	Action string
	// Kind and ID are the object's.
	Kind, ID string
	// Since and Until bound the time: since ≤ time < until.
	Since, Until time.Time
}

func (f *auditFilter) match(e *auditEntry) bool {
	r := &e.rec
	switch {
	case f.Actor != "" && !strings.EqualFold(f.Actor, r.Actor.Name),
		f.Action != "" && r.Action != f.Action && !(strings.HasSuffix(f.Action, ".") && strings.HasPrefix(r.Action, f.Action)),
		f.Kind != "" && f.Kind != r.Object.Kind,
		f.ID != "" && f.ID != r.Object.ID,
		!f.Since.IsZero() && e.at.Before(f.Since),
		!f.Until.IsZero() && !e.at.Before(f.Until):
		return false
	}
	return true
}

// page returns up to limit records matching f, newest first, older than the offset before
// (-1: from the newest), and the offset to pass for the next page (-1: none).
func (v *auditView) page(f auditFilter, before int64, limit int) ([]schemas.AuditRecord, int64) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := []schemas.AuditRecord{}
	last := int64(-1) // the offset of the last record of out
	for i := len(v.entries) - 1; i >= 0; i-- {
		e := &v.entries[i]
		if before >= 0 && e.offset >= before || !f.match(e) {
			continue
		}
		if len(out) == limit {
			return out, last
		}
		out = append(out, e.rec)
		last = e.offset
	}
	return out, -1
}
