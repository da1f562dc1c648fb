package console

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The retry tiers' backlog (the overview): the deliverer group's lag on each retry tier topic
// (records waiting for their time), read in the background into views.TierLag.

// tierLagEvery is how often the retry tiers' backlog is read.
const tierLagEvery = 5 * time.Second

// runTierLag reads the deliverer group's lag on the retry tiers every tierLagEvery.
func (s *Service) runTierLag(ctx context.Context) error {
	for {
		rows, err := s.readTierLag(ctx)
		s.tiers.Set(rows, err, s.now())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(tierLagEvery):
		}
	}
}

func (s *Service) readTierLag(ctx context.Context) ([]tierRow, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	lags, err := platform.ReadGroupLag(ctx, s.adm, s.cfg.DelivererGroup)
	if err != nil {
		return nil, err
	}
	var out []tierRow
	for _, l := range lags {
		if l.Err != nil {
			return nil, l.Err
		}
		for topic, sum := range l.Topics {
			if strings.HasPrefix(topic, schemas.RetryTopicPrefix) {
				out = append(out, tierRow{Topic: topic, Lag: max(0, sum)})
			}
		}
	}
	return sortTiers(out), nil
}

// sortTiers orders the retry tiers by their delay (10s, 1m, 15m, 1h), not by their names as
// text; a topic whose name holds no delay comes last, by name.
func sortTiers(rows []tierRow) []tierRow {
	delay := func(topic string) time.Duration {
		d, err := time.ParseDuration(strings.TrimPrefix(topic, schemas.RetryTopicPrefix))
		if err != nil || !strings.HasPrefix(topic, schemas.RetryTopicPrefix) {
			return 1<<63 - 1
		}
		return d
	}
	slices.SortStableFunc(rows, func(a, b tierRow) int {
		return cmp.Or(cmp.Compare(delay(a.Topic), delay(b.Topic)), strings.Compare(a.Topic, b.Topic))
	})
	return rows
}
