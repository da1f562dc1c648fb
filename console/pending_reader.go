package console

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The pending view's reader (docs/console.md#pending-retries): the retry tiers
// (webhooks.retry.<delay>) and the retry-now marks (webhooks.retried-now) into views.Pending,
// and every pendingEvery the deliverer group's committed offsets of the tiers, which remove
// the records the deliverer consumed.

// pendingEvery is how often the deliverer group's committed offsets are read.
const pendingEvery = 2 * time.Second

// pendingLookback is how far back the tiers are read when the console starts: a record
// waiting longer than a retry window (4 h) and the longest default tier (1 h) would be past its
// window when taken up.
const pendingLookback = 5 * time.Hour

// runPending keeps the pending view. The tier topics are those there are when it starts (a
// RETRY_SCHEDULE change creates new ones at the next start of the stack).
func (s *Service) runPending(ctx context.Context) error {
	if !waitReady(ctx, s.forget.ready) {
		return nil
	}
	topics, err := s.pendingTopics(ctx)
	if err != nil || len(topics) == 0 {
		return nil // stopped
	}
	s.readCommitted(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(pendingEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.readCommitted(ctx)
			}
		}
	}()
	defer func() { <-done }()
	return s.runView(ctx, "pending", s.ready.pending, platform.TopicReaderConfig{
		Topics: topics, Start: platform.StartAfter(s.now().Add(-pendingLookback)),
		Apply: func(r *kgo.Record) {
			if r.Topic == s.cfg.RetriedNowTopic {
				m, err := schemas.DecodeRetryNowMark(r.Value)
				if err != nil || m.State == "" {
					return
				}
				at, err := schemas.ParseTimestamp(m.At)
				if err != nil {
					at = r.Timestamp
				}
				s.pending.Mark(string(r.Key), m.State, at)
				return
			}
			rec, ok := pendingOf(r)
			if !ok {
				return
			}
			rec.User, _ = strings.CutPrefix(string(r.Key), rec.DestinationID+":")
			if s.forget.hides(rec.User, rec.FirstAttemptAt) {
				s.metrics.forgotten.WithLabelValues("pending").Inc()
				return // a deleted or suppressed user's: the deliverer drops it when due
			}
			s.pending.Add(rec)
		},
	}, nil)
}

// pendingTopics lists the retry tier topics and the retry-now marks' topic (when it exists),
// waiting (every pendingEvery) until there is a tier; nil when ctx ended first.
func (s *Service) pendingTopics(ctx context.Context) ([]string, error) {
	for {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		listed, err := s.adm.ListTopics(lctx)
		cancel()
		var topics []string
		marks := false
		if err == nil {
			for _, name := range listed.Names() {
				switch {
				case strings.HasPrefix(name, schemas.RetryTopicPrefix):
					topics = append(topics, name)
				case name == s.cfg.RetriedNowTopic:
					marks = true
				}
			}
		}
		if len(topics) > 0 {
			slices.Sort(topics)
			if marks {
				topics = append(topics, s.cfg.RetriedNowTopic)
			}
			return topics, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pendingEvery):
		}
	}
}

// readCommitted reads the deliverer group's committed offsets of the tiers into the view; on an
// error the view keeps the last ones.
func (s *Service) readCommitted(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	offs, err := s.adm.FetchOffsets(ctx, s.cfg.DelivererGroup)
	if err != nil {
		return
	}
	out := map[views.TopicPartition]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && strings.HasPrefix(o.Topic, schemas.RetryTopicPrefix) && o.At >= 0 {
			out[views.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.At
		}
	})
	s.pending.SetCommitted(out)
}

// pendingOf reads a tier record's headers; false when it names no destination or message.
func pendingOf(r *kgo.Record) (views.PendingRecord, bool) {
	p := views.PendingRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, WrittenAt: r.Timestamp, Attempt: 1}
	for _, h := range r.Headers {
		v := string(h.Value)
		switch h.Key {
		case schemas.HeaderDestinationID:
			p.DestinationID = v
		case schemas.HeaderMessageID:
			p.MessageID = v
		case schemas.HeaderType:
			p.Type = v
		case schemas.HeaderAttempt:
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				p.Attempt = n
			}
		case schemas.HeaderDeferrals:
			p.Deferrals, _ = strconv.Atoi(v)
		case schemas.HeaderDueAt:
			p.DueAt, _ = schemas.ParseTimestamp(v)
		case schemas.HeaderFirstAttemptAt:
			p.FirstAttemptAt, _ = schemas.ParseTimestamp(v)
		case schemas.HeaderLastError:
			p.LastError = v
		case schemas.HeaderLastStatus:
			p.LastStatus, _ = strconv.Atoi(v)
		case schemas.HeaderURL:
			p.URL = schemas.RedactURL(v)
		}
	}
	return p, p.DestinationID != "" && p.MessageID != ""
}
