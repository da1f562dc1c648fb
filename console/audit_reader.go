package console

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The audit trail's reader: tributary.audit into views.Audit, the last AuditWindow records in
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
	return s.runView(ctx, "audit", s.auditTrail.ready, platform.TopicReaderConfig{
		Topic: s.cfg.AuditTopic, Start: platform.StartLast(int64(s.cfg.AuditWindow)),
		Apply: func(r *kgo.Record) {
			a, err := schemas.DecodeAuditRecord(r.Value)
			if err != nil {
				s.logger.Warn().Err(err).Str("topic", r.Topic).Int64("offset", r.Offset).Msg("skipping an audit record that does not decode")
				return
			}
			s.auditTrail.view.Add(r.Offset, a)
		},
	}, nil)
}
