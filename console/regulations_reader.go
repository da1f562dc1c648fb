package console

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Deletion and suppression requests, in the shapes of Segment's Public API regulations. A
// regulation is written as one tracking.deletions record per subject (keyed by user id, with
// the regulation's id as requestId); the router sends the delete notices and writes one
// tracking.deletions.status record per subject it processed, and every other store (audiences,
// the deliverer, the console's own purge) writes its report there once it is done
// (schemas.DeletionReport). The console reads both topics from their start: a regulation is
// RUNNING until every expected store (CONSOLE_REGULATION_STORES) reported for every subject,
// then FINISHED (docs/console.md#regulations).

// The regulations' reader: tracking.deletions and tracking.deletions.status into
// views.Regulations.

// runRegulations keeps the regulations view: both topics from their start.
func (s *Service) runRegulations(ctx context.Context) error {
	return s.runView(ctx, "regulations", s.ready.regulations, platform.TopicReaderConfig{
		Topics: []string{s.cfg.DeletionsTopic, s.cfg.DeletionsStatusTopic},
		Apply: func(r *kgo.Record) {
			l := s.regulations
			if r.Topic == s.cfg.DeletionsStatusTopic {
				if rep, st, err := schemas.DecodeDeletionStatusRecord(r.Value); err == nil {
					l.Reported(rep, st)
				}
				return
			}
			req, at, err := schemas.DecodeDeletionRequest(r.Value)
			if err != nil {
				return // the router skips it too
			}
			if at.IsZero() {
				at = r.Timestamp
			}
			id := req.RequestID
			if id == "" { // as the router derives it
				id = r.Topic + "-" + strconv.Itoa(int(r.Partition)) + "-" + strconv.FormatInt(r.Offset, 10)
			}
			l.Requested(id, at.UTC(), *req)
		},
	}, nil)
}
