package console

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// dlqCounts counts each destination's dead letters not replayed yet, from webhooks.dlq and its
// replay marks (webhooks.dlq.replayed), for the overview: the DLQ's size at a glance without
// reading it at every request.
type dlqCounts struct {
	mu       sync.Mutex
	total    map[string]int             // dead letters by destination
	replayed map[string]map[string]bool // replayed dead letters' "partition:offset" by destination
	ready    chan struct{}
}

func newDLQCounts() *dlqCounts {
	return &dlqCounts{total: map[string]int{}, replayed: map[string]map[string]bool{}, ready: make(chan struct{})}
}

// pending returns the destination's dead letters not replayed yet.
func (c *dlqCounts) pending(dest string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(0, c.total[dest]-len(c.replayed[dest]))
}

// runDLQCounts keeps the counts: both topics from their start.
func (s *Service) runDLQCounts(ctx context.Context) error {
	c := s.dlq
	return s.runTail(ctx, &tail{
		name:   "dlq",
		topics: []string{s.cfg.DLQTopic, s.cfg.DLQReplayedTopic},
		ready:  c.ready,
		apply: func(r *kgo.Record) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if r.Topic == s.cfg.DLQTopic {
				if d := header(r, schemas.HeaderDestinationID); d != "" {
					c.total[d]++
				}
				return
			}
			var m struct {
				DestinationID string `json:"destinationId"`
			}
			if len(r.Value) == 0 || json.Unmarshal(r.Value, &m) != nil || m.DestinationID == "" {
				return
			}
			if c.replayed[m.DestinationID] == nil {
				c.replayed[m.DestinationID] = map[string]bool{}
			}
			c.replayed[m.DestinationID][string(r.Key)] = true
		},
	})
}
