package console

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// dlqView follows webhooks.dlq and its replay marks (webhooks.dlq.replayed): per destination
// the count of dead letters not replayed yet (the overview), and the last DLQPerDestination
// dead letters' headers, newest last (the DLQ lists of the API and the UI), so that no page
// reads the DLQ topic. Replaying still reads the topic (platform.ReplayDeadLetters): it needs the
// bodies.
type dlqView struct {
	mu    sync.Mutex
	max   int
	dests map[string]*destDLQ
	ready chan struct{}
}

// destDLQ is one destination's part of the view.
type destDLQ struct {
	total    int                  // dead letters read
	replayed map[string]time.Time // replay marks by "partition:offset" (the last replay)
	last     []platform.DeadLetter
}

func newDLQView(max int) *dlqView {
	return &dlqView{max: max, dests: map[string]*destDLQ{}, ready: make(chan struct{})}
}

func (c *dlqView) dest(id string) *destDLQ {
	d := c.dests[id]
	if d == nil {
		d = &destDLQ{replayed: map[string]time.Time{}}
		c.dests[id] = d
	}
	return d
}

// pending returns the destination's dead letters not replayed yet.
func (c *dlqView) pending(dest string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dests[dest]
	if d == nil {
		return 0
	}
	return max(0, d.total-len(d.replayed))
}

// list returns the destination's last dead letters, newest first, with when each was replayed;
// those replayed before only with again.
func (c *dlqView) list(dest string, again bool) []platform.DeadLetter {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.dests[dest]
	if d == nil {
		return nil
	}
	out := make([]platform.DeadLetter, 0, len(d.last))
	for _, dl := range slices.Backward(d.last) {
		dl.ReplayedAt = d.replayed[dl.MarkerKey()]
		if again || dl.ReplayedAt.IsZero() {
			out = append(out, dl)
		}
	}
	return out
}

// runDLQView keeps the view: both topics from their start.
func (s *Service) runDLQView(ctx context.Context) error {
	c := s.dlq
	return s.runTail(ctx, &tail{
		name:   "dlq",
		topics: []string{s.cfg.DLQTopic, s.cfg.DLQReplayedTopic},
		ready:  c.ready,
		apply: func(r *kgo.Record) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if r.Topic == s.cfg.DLQTopic {
				dl := platform.DeadLetterOf(r)
				if dl.DestinationID == "" {
					return
				}
				d := c.dest(dl.DestinationID)
				d.total++
				if len(d.last) == c.max {
					d.last = slices.Delete(d.last, 0, 1)
				}
				d.last = append(d.last, dl)
				return
			}
			var m struct {
				DestinationID string `json:"destinationId"`
				ReplayedAt    string `json:"replayedAt"`
			}
			if len(r.Value) == 0 || json.Unmarshal(r.Value, &m) != nil || m.DestinationID == "" {
				return
			}
			at, err := schemas.ParseTimestamp(m.ReplayedAt)
			if err != nil {
				at = r.Timestamp
			}
			c.dest(m.DestinationID).replayed[string(r.Key)] = at
		},
	})
}
