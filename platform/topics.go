package platform

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tributary-cdp/tributary/schemas"
)

// TopicSpec is how one topic is created.
type TopicSpec struct {
	// Name is the topic's name.
	Name string
	// Partitions is the partition count at creation; EnsureTopics also raises an existing
	// topic to it, never lowers it.
	Partitions int32
	// Retention is retention.ms: 0 keeps the broker default, -1 keeps records forever.
	// It does not apply to compacted topics, unless AlsoDelete.
	Retention time.Duration
	// Compact sets cleanup.policy=compact (keep the latest record per key; tombstones
	// delete) instead of delete.
	Compact bool
	// AlsoDelete, with Compact and a positive Retention, also deletes the records older than
	// Retention: cleanup.policy=compact,delete (a compacted topic whose records expire, e.g.
	// tributary.sessions).
	AlsoDelete bool
	// Segment is segment.ms (0: the broker default, a week): how long the active segment is
	// written before it rolls; retention only deletes rolled segments, so a topic kept
	// for less than the broker's default segment time needs a shorter one.
	Segment time.Duration
	// MaxCompactionLag is max.compaction.lag.ms of a compacted topic (0: the broker default,
	// never): a record superseded (or tombstoned) longer ago is compacted away at the cleaner's
	// next pass whatever the dirty ratio, once its segment has rolled.
	MaxCompactionLag time.Duration
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio of a compacted topic (0: the broker
	// default, 0.5): the share of superseded records at which the cleaner compacts the log.
	MinCleanableDirtyRatio float64
	// DeleteRetention is delete.retention.ms of a compacted topic (0: the broker default, a
	// day): how long a tombstone stays after compaction, for a reader that read the older
	// record to see it. It must be longer than reading the topic from its start takes.
	DeleteRetention time.Duration
}

// Compaction of audiences.state (docs/topics.md#audiencesstate): a deleted profile's earlier
// versions (traits, counters) and its redirects go within about two hours on Apache Kafka,
// which never compacts the active segment: segments roll after an hour (segment.ms), every
// record superseded for an hour is compacted at the cleaner's next pass (max.compaction.lag.ms)
// whatever the dirty ratio, the cleaner starts at 10 % superseded records instead of 50 %, and
// tombstones stay an hour after that (delete.retention.ms), far longer than a restore reads.
const (
	AudiencesStateSegment         = time.Hour
	AudiencesStateMaxCompactLag   = time.Hour
	AudiencesStateDirtyRatio      = 0.1
	AudiencesStateDeleteRetention = time.Hour
)

// Retention periods of DefaultTopics.
const (
	day = 24 * time.Hour
	// RetentionDefault keeps what flows through the pipeline for a week: long enough to
	// replay after an incident, short enough to bound the disk.
	RetentionDefault = 7 * day
	// RetentionLong keeps what an operator acts on later (the DLQ, deletion requests and
	// their status) for 30 days.
	RetentionLong = 30 * day
	// RetentionDedupe keeps the router's de-duplication log: the longest DEDUPE_WINDOW.
	RetentionDedupe = time.Hour
	// RetentionSessions keeps the console's session revocations for twice a session's life
	// (12 h, docs/console.md#sessions): a revocation is useless once its session has expired.
	RetentionSessions = day
	// KeysSegment is segment.ms of tributary.keys: compaction never touches the active segment,
	// so a tombstoned data key is compacted away within about this long (plus the cleaner's
	// next pass) once records follow it.
	KeysSegment = time.Minute
	// KeysDeleteRetention is delete.retention.ms of tributary.keys: how long the tombstone of a
	// shredded key stays (so that every reader learns the key is gone) before it is removed.
	KeysDeleteRetention = time.Hour
	// RetentionAudit keeps the audit trail (tributary.audit) for 400 days by default: more
	// than a year of changes, for a yearly review (AUDIT_RETENTION sets it at creation).
	RetentionAudit = 400 * day
)

// DefaultTopics returns every topic of docs/topics.md, each with its partition count, retention and
// cleanup policy, and one retry tier topic per distinct delay of retrySchedule (in the order
// they first appear). partitions is KAFKA_PARTITIONS.
//
//	topic                      partitions  cleanup  retention
//	tributary.config           1           compact  (forever: latest per key)
//	tributary.sessions         1           compact  1 day (compact,delete; 1-hour segments)
//	tributary.keys             1           compact  (forever: live keys; 1-minute segments,
//	                                                 tombstones kept 1 hour, dirty ratio 0.01)
//	audiences.state            partitions  compact  (forever: latest per key; 1-hour segments,
//	                                                 compacted within the hour: AudiencesStateSegment)
//	audiences.repartition      partitions  delete   7 days
//	tracking.suppressions      partitions  compact  (forever: latest per key)
//	tracking.inbound           partitions  delete   7 days
//	tracking.events            partitions  delete   7 days
//	tracking.rejected          partitions  delete   7 days
//	tracking.deletions         partitions  delete   30 days
//	tracking.deletions.status  partitions  delete   30 days
//	webhooks.deliveries        partitions  delete   7 days
//	router.dedupe              partitions  delete   1 hour (10-minute segments)
//	webhooks.retry.<delay>     partitions  delete   7 days (one topic per distinct delay)
//	webhooks.dlq               partitions  delete   30 days
//	webhooks.dlq.replayed      1           delete   30 days
//	webhooks.retried-now       1           compact  7 days (compact,delete; 1-hour segments)
//	webhooks.attempts          partitions  delete   7 days
//	tributary.audit            1           delete   400 days (AuditTopic: AUDIT_RETENTION)
//
// tributary.config has one partition so that every service reads the config writes in the
// order they were made; tributary.keys has one (KeysTopic).
func DefaultTopics(partitions int32, retrySchedule []time.Duration) []TopicSpec {
	specs := []TopicSpec{
		{Name: schemas.TopicConfig, Partitions: 1, Compact: true},
		{Name: schemas.TopicSessions, Partitions: 1, Compact: true, AlsoDelete: true, Retention: RetentionSessions, Segment: time.Hour},
		KeysTopic(),
		{Name: schemas.TopicAudiencesState, Partitions: partitions, Compact: true, Segment: AudiencesStateSegment,
			MaxCompactionLag: AudiencesStateMaxCompactLag, MinCleanableDirtyRatio: AudiencesStateDirtyRatio, DeleteRetention: AudiencesStateDeleteRetention},
		{Name: schemas.TopicAudiencesRepartition, Partitions: partitions, Retention: RetentionDefault},
		{Name: schemas.TopicSuppressions, Partitions: partitions, Compact: true},
		{Name: schemas.TopicInbound, Partitions: partitions, Retention: RetentionDefault},
		{Name: schemas.TopicEvents, Partitions: partitions, Retention: RetentionDefault},
		{Name: schemas.TopicRejected, Partitions: partitions, Retention: RetentionDefault},
		{Name: schemas.TopicDeletions, Partitions: partitions, Retention: RetentionLong},
		{Name: schemas.TopicDeletionsStatus, Partitions: partitions, Retention: RetentionLong},
		{Name: schemas.TopicDeliveries, Partitions: partitions, Retention: RetentionDefault},
		{Name: schemas.TopicDedupe, Partitions: partitions, Retention: RetentionDedupe, Segment: 10 * time.Minute},
	}
	var seen []time.Duration
	for _, d := range retrySchedule {
		if slices.Contains(seen, d) {
			continue
		}
		seen = append(seen, d)
		specs = append(specs, TopicSpec{Name: schemas.RetryTopic(d), Partitions: partitions, Retention: RetentionDefault})
	}
	return append(append(specs,
		TopicSpec{Name: schemas.TopicDLQ, Partitions: partitions, Retention: RetentionLong},
		TopicSpec{Name: schemas.TopicDLQReplayed, Partitions: 1, Retention: RetentionLong},
		RetriedNowTopic(),
		TopicSpec{Name: schemas.TopicAttempts, Partitions: partitions, Retention: RetentionDefault},
		AuditTopic(RetentionAudit),
	), AutoDisableTopics(partitions)...)
}

// AuditTopic is the spec of tributary.audit, the audit trail (docs/topics.md#tributaryaudit):
// cleanup.policy=delete with retention (0: RetentionAudit), nothing ever rewritten. One
// partition: a few records per change or sign-in, far below what a partition takes, and one
// order for the whole trail, which the console's view and export read newest last.
func AuditTopic(retention time.Duration) TopicSpec {
	if retention == 0 {
		retention = RetentionAudit
	}
	return TopicSpec{Name: schemas.TopicAudit, Partitions: 1, Retention: retention}
}

// WithAuditRetention returns specs with tributary.audit's retention set to retention
// (AUDIT_RETENTION; 0 keeps RetentionAudit).
func WithAuditRetention(specs []TopicSpec, retention time.Duration) []TopicSpec {
	for i := range specs {
		if specs[i].Name == schemas.TopicAudit {
			specs[i] = AuditTopic(retention)
		}
	}
	return specs
}

// AutoDisableTopics are the specs of auto-disable's topics (docs/delivery.md#auto-disable):
// webhooks.parked (an auto-disabled destination's deliveries, kept as long as dead letters), its
// replay marks, and tributary.notices. The deliverer creates them when they are missing.
func AutoDisableTopics(partitions int32) []TopicSpec {
	return []TopicSpec{
		{Name: schemas.TopicParked, Partitions: partitions, Retention: RetentionLong},
		{Name: schemas.TopicParkedReplayed, Partitions: 1, Retention: RetentionLong},
		{Name: schemas.TopicNotices, Partitions: 1, Retention: RetentionLong},
	}
}

// RetriedNowTopic is the spec of webhooks.retried-now, the retry-now marks
// (docs/topics.md#webhooksretried-now): the latest state per tier record retried now, kept as
// long as the tiers keep their records (compact,delete, 7 days, 1-hour segments). One partition:
// every deliverer and console reads all of it, and it holds one record per message retried now.
// The deliverer creates it when it is missing.
func RetriedNowTopic() TopicSpec {
	return TopicSpec{Name: schemas.TopicRetriedNow, Partitions: 1, Compact: true, AlsoDelete: true, Retention: RetentionDefault, Segment: time.Hour}
}

// KeysTopic is the spec of tributary.keys, the data keys of crypto-shredding
// (docs/topics.md#tributarykeys): compacted with short segments, a low dirty ratio and an hour
// of tombstone retention, so that a shredded key leaves the log (and the brokers' disks)
// within minutes of its tombstone rather than days. It has one partition, whatever
// KAFKA_PARTITIONS: every service reads all of it, one key is written per user (far below
// what a partition takes), and a reader that meets an unknown key id waits for the end offsets
// of the partitions it knows — a partition added while it runs would be one it does not read
// yet.
func KeysTopic() TopicSpec {
	return TopicSpec{Name: schemas.TopicKeys, Partitions: 1, Compact: true,
		Segment: KeysSegment, DeleteRetention: KeysDeleteRetention, MinCleanableDirtyRatio: 0.01}
}

// Configs returns the topic configs the spec creates the topic with: cleanup.policy,
// retention.ms unless Retention is 0 or the topic is compacted (and not AlsoDelete), and
// segment.ms and the compaction settings that are set.
func (s TopicSpec) Configs() map[string]*string {
	compactDelete := s.Compact && s.AlsoDelete && s.Retention > 0
	policy := "delete"
	switch {
	case compactDelete:
		policy = "compact,delete"
	case s.Compact:
		policy = "compact"
	}
	cfg := map[string]*string{"cleanup.policy": &policy}
	if (!s.Compact && s.Retention != 0) || compactDelete {
		ms := "-1"
		if s.Retention > 0 {
			ms = strconv.FormatInt(s.Retention.Milliseconds(), 10)
		}
		cfg["retention.ms"] = &ms
	}
	setMS := func(key string, d time.Duration) {
		if d > 0 {
			ms := strconv.FormatInt(d.Milliseconds(), 10)
			cfg[key] = &ms
		}
	}
	setMS("segment.ms", s.Segment)
	if s.Compact {
		setMS("max.compaction.lag.ms", s.MaxCompactionLag)
		setMS("delete.retention.ms", s.DeleteRetention)
		if s.MinCleanableDirtyRatio > 0 {
			r := strconv.FormatFloat(s.MinCleanableDirtyRatio, 'f', -1, 64)
			cfg["min.cleanable.dirty.ratio"] = &r
		}
	}
	return cfg
}

// topicReadyTimeout bounds how long EnsureTopics waits for created topics to have leaders.
const topicReadyTimeout = 30 * time.Second

// EnsureTopics makes every topic of specs exist, idempotently: a missing topic is created with
// its spec's partitions and configs and replicationFactor (-1: the broker default); an existing
// topic keeps its configs (operators may have tuned them) and gains partitions if it has fewer
// than its spec asks for, never loses any. Losing a creation race to another service is fine.
// It returns once every created topic has a leader for each partition, so that callers can
// produce at once. Errors name the topic.
func EnsureTopics(ctx context.Context, adm *kadm.Client, replicationFactor int16, specs []TopicSpec) error {
	names := make([]string, 0, len(specs))
	for _, s := range specs {
		if s.Name == "" {
			return errors.New("ensuring topics: a topic spec has no name")
		}
		if s.Partitions < 1 {
			return fmt.Errorf("ensuring topic %s: %d partitions: must be at least 1", s.Name, s.Partitions)
		}
		names = append(names, s.Name)
	}
	if len(specs) == 0 {
		return nil
	}
	details, err := freshTopics(ctx, adm, names)
	if err != nil {
		return fmt.Errorf("listing topics: %w", err)
	}
	var created []string
	var errs []error
	for _, s := range specs {
		d, ok := details[s.Name]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			_, err := adm.CreateTopic(ctx, s.Partitions, replicationFactor, s.Configs(), s.Name)
			if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
				errs = append(errs, fmt.Errorf("creating topic %s: %w", s.Name, err))
				continue
			}
			created = append(created, s.Name)
		case d.Err != nil:
			errs = append(errs, fmt.Errorf("describing topic %s: %w", s.Name, d.Err))
		case int32(len(d.Partitions)) < s.Partitions:
			resp, err := adm.UpdatePartitions(ctx, int(s.Partitions), s.Name)
			if err == nil {
				if r, ok := resp[s.Name]; ok {
					err = r.Err
				}
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("raising topic %s from %d to %d partitions: %w", s.Name, len(d.Partitions), s.Partitions, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return waitForLeaders(ctx, adm, created)
}

// waitForLeaders polls metadata until every topic is listed with a leader for each partition:
// on a real cluster a topic is usable a moment after CreateTopics returns.
func waitForLeaders(ctx context.Context, adm *kadm.Client, topics []string) error {
	if len(topics) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, topicReadyTimeout)
	defer cancel()
	for {
		details, err := freshTopics(ctx, adm, topics)
		pending := ""
		if err == nil {
			for _, t := range topics {
				d, ok := details[t]
				if !ok || d.Err != nil || len(d.Partitions) == 0 {
					pending = t
					break
				}
				for _, p := range d.Partitions {
					if p.Leader < 0 || p.Err != nil {
						pending = t
					}
				}
				if pending != "" {
					break
				}
			}
			if pending == "" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if pending == "" && err != nil {
				return fmt.Errorf("waiting for created topics: %w", err)
			}
			return fmt.Errorf("waiting for topic %s to have leaders: %w", pending, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freshTopics describes topics from the brokers. kadm's ListTopics answers from the client's
// metadata cache (up to MetadataMinAge, 5s, old), which would hide a topic created a moment
// ago; asking for authorized operations makes kadm issue a direct request instead.
func freshTopics(ctx context.Context, adm *kadm.Client, topics []string) (kadm.TopicDetails, error) {
	md, err := adm.Metadata(kadm.WithAuthorizedOps(ctx), topics...)
	if err != nil {
		return nil, err
	}
	return md.Topics, nil
}
