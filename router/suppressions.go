package router

import (
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
)

// suppressions is the suppression list: the compacted topic tracking.suppressions (key userId;
// a tombstone lifts the suppression) materialised in memory by platform.Regulations, the
// implementation the deliverer's egress check shares (docs/delivery.md#deleted-and-suppressed-users).
// Every router replica reads the whole topic without a consumer group. The deletions consumer
// also applies its own writes at once (apply), so a suppression takes effect in this process
// without waiting for the echo. Run, Ready and Suppressed are the Regulations'.
type suppressions struct {
	*platform.Regulations
}

func newSuppressions(topic string, kafka platform.KafkaSettings, opts []kgo.Opt, logger zerolog.Logger) (*suppressions, error) {
	g, err := platform.NewRegulations(platform.RegulationsConfig{Kafka: kafka, SuppressionsTopic: topic, Opts: opts, Logger: logger})
	if err != nil {
		return nil, err
	}
	return &suppressions{g}, nil
}

// Len is how many users are suppressed.
func (s *suppressions) Len() int {
	n, _ := s.Regulations.Len()
	return n
}

// apply records one suppression (on) or its lifting.
func (s *suppressions) apply(userID string, on bool) { s.ApplySuppression(userID, on) }
