package platform

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// The audit records of tributary-init's config writes (docs/console.md#audit-trail): a config
// file applied, the config re-encrypted. As in the console, the change comes first: its records
// follow once Kafka acknowledged it, and a failure to write them is logged (each record in full,
// its secrets hashed), never an error of the apply.

// configAuditTimeout bounds the write of the audit records of one apply.
const configAuditTimeout = 10 * time.Second

// writeConfigAudit records on tributary.audit the config records out, just written, against
// current, the config they changed: one record per object, with action (e.g. config.reencrypt)
// or, when it is "", "<kind>.create", "<kind>.update" or "<kind>.delete"; the actor is
// tributary-init. A missing audit topic (a cluster whose topics an older tributary-init made)
// is logged, not waited for.
func writeConfigAudit(ctx context.Context, kafka KafkaSettings, action string, current map[string]currentObject, out []schemas.ConfigRecord,
	keys *schemas.Keyring, logger zerolog.Logger) {
	if len(out) == 0 {
		return
	}
	now := schemas.FormatTimestamp(time.Now())
	actor := schemas.AuditActor{Name: schemas.ActorTributaryInit, Kind: schemas.ActorTributaryInit}
	recs := make([]*kgo.Record, 0, len(out))
	var errs []error
	for _, rec := range out {
		cur, existed := current[rec.Key]
		a := schemas.AuditRecord{V: schemas.AuditVersion, ID: uuid.NewString(), Time: now, Actor: actor, Action: action,
			Result: schemas.AuditResult{Status: schemas.AuditOK}}
		after, err := schemas.DecodeConfigRecordWith(rec.Key, rec.Value, keys)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		a.Object = schemas.AuditObject{Kind: schemas.AuditKind(after.Kind), ID: after.ID}
		if a.Action == "" {
			a.Action = schemas.AuditConfigAction(after.Kind, existed, after.Deleted())
		}
		if existed {
			if a.Before, err = schemas.AuditState(cur.obj.Value()); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if a.After, err = schemas.AuditState(after.Value()); err != nil {
			errs = append(errs, err)
			continue
		}
		v, err := a.Encode()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		recs = append(recs, &kgo.Record{Topic: schemas.TopicAudit, Key: []byte(actor.Name), Value: v})
	}
	if err := produceAudit(ctx, kafka, recs, logger); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		ev := logger.Error().Err(err).Int("records", len(out))
		for _, r := range recs {
			ev = ev.RawJSON("audit_record", r.Value)
		}
		ev.Msg("audit records of the config changes not written")
	}
}

// produceAudit writes recs to tributary.audit with a client of its own, once the topic exists.
func produceAudit(ctx context.Context, kafka KafkaSettings, recs []*kgo.Record, logger zerolog.Logger) error {
	if len(recs) == 0 {
		return nil
	}
	cl, err := NewKafkaClient(kafka, logger, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), configAuditTimeout)
	defer cancel()
	details, err := freshTopics(ctx, kadm.NewClient(cl), []string{schemas.TopicAudit})
	if err != nil {
		return err
	}
	if d, ok := details[schemas.TopicAudit]; !ok || d.Err != nil {
		return errors.New(schemas.TopicAudit + " does not exist: run tributary-init to create it")
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}
