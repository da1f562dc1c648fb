package router

import (
	"context"
	"fmt"
	"sync"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
)

// suppressions is the suppression list: the compacted topic tracking.suppressions (key userId;
// a tombstone lifts the suppression) materialised in memory. Every router replica reads the
// whole topic without a consumer group. The deletions consumer also applies its own writes at
// once (apply), so a suppression takes effect in this process without waiting for the echo.
type suppressions struct {
	topic  string
	kafka  platform.KafkaSettings
	opts   []kgo.Opt
	logger zerolog.Logger

	mu    sync.RWMutex
	users map[string]struct{}

	ready     chan struct{}
	readyOnce sync.Once
}

func newSuppressions(topic string, kafka platform.KafkaSettings, opts []kgo.Opt, logger zerolog.Logger) *suppressions {
	return &suppressions{topic: topic, kafka: kafka, opts: opts, logger: logger,
		users: map[string]struct{}{}, ready: make(chan struct{})}
}

// Suppressed reports whether userID is on the list.
func (s *suppressions) Suppressed(userID string) bool {
	s.mu.RLock()
	_, ok := s.users[userID]
	s.mu.RUnlock()
	return ok
}

// Len is how many users are suppressed.
func (s *suppressions) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.users)
}

// apply records one suppression (on) or its lifting.
func (s *suppressions) apply(userID string, on bool) {
	s.mu.Lock()
	if on {
		s.users[userID] = struct{}{}
	} else {
		delete(s.users, userID)
	}
	s.mu.Unlock()
}

// Ready is closed once the list has been read up to the end offsets found at start.
func (s *suppressions) Ready() <-chan struct{} { return s.ready }

// Run reads the topic from the start until ctx is done.
func (s *suppressions) Run(ctx context.Context) error {
	opts := append([]kgo.Opt{
		kgo.ConsumeTopics(s.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, s.opts...)
	cl, err := platform.NewKafkaClient(s.kafka, s.logger, opts...)
	if err != nil {
		return fmt.Errorf("suppression list: %w", err)
	}
	defer cl.Close()
	ends, err := platform.WaitEndOffsets(ctx, kadm.NewClient(cl), s.topic, s.logger)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if len(ends) == 0 {
		s.markReady()
	}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		fs.EachError(func(_ string, p int32, err error) {
			s.logger.Warn().Err(err).Int32("partition", p).Msg("fetching the suppression list")
		})
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := ends[r.Partition]; ok && r.Offset+1 >= end {
				delete(ends, r.Partition)
			}
			s.apply(string(r.Key), r.Value != nil)
		})
		if len(ends) == 0 {
			s.markReady()
		}
	}
}

func (s *suppressions) markReady() {
	s.readyOnce.Do(func() {
		close(s.ready)
		s.logger.Info().Int("users", s.Len()).Msg("suppression list loaded")
	})
}
