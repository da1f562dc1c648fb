package router

import (
	"context"
	"fmt"
	"sync"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
)

// suppressions is the suppression list: the compacted topic tracking.suppressions (key userId;
// a tombstone lifts the suppression) materialised in memory. Every router replica reads the
// whole topic without a consumer group (a platform.TopicReader). The deletions consumer also
// applies its own writes at once (apply), so a suppression takes effect in this process
// without waiting for the echo.
type suppressions struct {
	reader *platform.TopicReader
	logger zerolog.Logger

	mu    sync.RWMutex
	users map[string]struct{}
}

func newSuppressions(topic string, kafka platform.KafkaSettings, opts []kgo.Opt, logger zerolog.Logger) (*suppressions, error) {
	s := &suppressions{logger: logger, users: map[string]struct{}{}}
	var err error
	s.reader, err = platform.NewTopicReader(platform.TopicReaderConfig{
		Kafka:  kafka,
		Topic:  topic,
		Apply:  func(r *kgo.Record) { s.apply(string(r.Key), r.Value != nil) },
		Polled: s.polled,
		Follow: true,
		Opts:   opts,
		Logger: logger,
	})
	if err != nil {
		return nil, fmt.Errorf("suppression list: %w", err)
	}
	return s, nil
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
func (s *suppressions) Ready() <-chan struct{} { return s.reader.Ready() }

// Run reads the topic from the start until ctx is done.
func (s *suppressions) Run(ctx context.Context) error {
	if err := s.reader.Run(ctx); err != nil {
		return fmt.Errorf("suppression list: %w", err)
	}
	return nil
}

func (s *suppressions) polled(caughtUp bool) error {
	select {
	case <-s.reader.Ready():
	default:
		if caughtUp {
			s.logger.Info().Int("users", s.Len()).Msg("suppression list loaded")
		}
	}
	return nil
}
