package console

import (
	"context"
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The DLQ view's reader: webhooks.dlq and its replay marks (webhooks.dlq.replayed) into
// views.DLQ, and the dead letters of the stats window into views.Health.

// runDLQView keeps the view: both topics from their start, once the rules of what the console
// forgets were read (docs/console.md#what-the-console-forgets).
func (s *Service) runDLQView(ctx context.Context) error {
	if !waitReady(ctx, s.forget.ready) {
		return nil
	}
	c := s.dlq
	return s.runView(ctx, "dlq", s.ready.dlq, platform.TopicReaderConfig{
		Topics: []string{s.cfg.DLQTopic, s.cfg.DLQReplayedTopic},
		Apply: func(r *kgo.Record) {
			if r.Topic == s.cfg.DLQTopic {
				dl := platform.DeadLetterOf(r)
				if dl.DestinationID == "" {
					return
				}
				// Keyed <destinationId>:<userId, else anonymousId>: whose message it is.
				user, _ := strings.CutPrefix(string(r.Key), dl.DestinationID+":")
				if !c.Add(dl, user, s.forget.hides) {
					s.metrics.forgotten.WithLabelValues("dlq").Inc()
					s.forget.forgetMessages([]string{dl.MessageID})
					return
				}
				// The health view counts the dead letters of its window.
				if dl.At.After(s.now().Add(-s.cfg.StatsWindow)) {
					s.health.Add([]views.HealthEvent{{DestinationID: dl.DestinationID, MessageID: dl.MessageID, At: dl.At,
						Attempt: dl.Attempts, Reason: dl.Reason, DeadLettered: true}}, nil)
				}
				// The messages view: a dead letter written without an attempt (the retry window
				// ended while it waited, the destination was disabled) makes it dead_lettered.
				s.messages.DeadLettered(dl.DestinationID, dl.MessageID, dl.Reason, dl.At)
				return
			}
			m, ok := replayMarkOf(r.Value)
			if !ok || m.DestinationID == "" {
				return
			}
			at, err := schemas.ParseTimestamp(m.ReplayedAt)
			if err != nil {
				at = r.Timestamp
			}
			msg := platform.DeadLetter{DestinationID: m.DestinationID, MessageID: m.MessageID}
			if m.MessageID == "" { // a dead letter without a message id stands alone
				p, o, _ := schemas.ParseReplayMarkKey(string(r.Key))
				msg.Partition, msg.Offset = p, o
			}
			c.Mark(string(r.Key), msg, at)
		},
	}, nil)
}

// replayMarkNames are the JSON names of schemas.ReplayMark's fields, in their order.
var replayMarkNames = []string{"replayedAt", "destinationId", "messageId", "url", "supersededBy"}

// replayMarkOf reads a webhooks.dlq.replayed record as schemas.DecodeReplayMark would
// (console/decode.go); false when it cannot be read.
func replayMarkOf(b []byte) (schemas.ReplayMark, bool) {
	if len(b) == 0 {
		return schemas.ReplayMark{}, false
	}
	var f [5][]byte
	err := schemas.EachMember(b, func(key, v []byte) error {
		i, err := fieldIndex(key, replayMarkNames)
		if i < 0 {
			return err
		}
		return decodeString(v, &f[i])
	})
	if err != nil && !errors.Is(err, errWrongType) {
		m, err := schemas.DecodeReplayMark(b) // the scanner refused it, or a key it cannot match
		return m, err == nil
	}
	return schemas.ReplayMark{ReplayedAt: string(f[0]), DestinationID: string(f[1]), MessageID: string(f[2]),
		URL: string(f[3]), SupersededBy: string(f[4])}, err == nil
}
