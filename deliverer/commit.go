package deliverer

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Committing offsets: only up to the lowest unfinished record of each partition (tracker.go),
// periodically, on revocation and at shutdown (docs/delivery.md#crash-safety).

func (s *Service) commitLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.commit(ctx, true)
		}
	}
}

func (s *Service) commit(ctx context.Context, onlyDirty bool) {
	marks := s.track.commitMarks(onlyDirty, nil)
	if len(marks) == 0 {
		return
	}
	s.cl.CommitOffsetsSync(ctx, marks, s.commitDone)
}

// commitDone logs a failed commit; the records are then delivered again after a restart.
func (s *Service) commitDone(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
	if err == nil && resp != nil {
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
					err = e
				}
			}
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.logger.Warn().Err(err).Msg("committing offsets; those records will be delivered again after a restart")
	}
}

// onAssigned starts the partitions' generation in the tracker: their records are tracked.
func (s *Service) onAssigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	s.track.assign(assigned)
	s.warmTiers(ctx, cl, assigned)
}

// onRevoked commits what finished in the revoked partitions, drops their held records and resumes
// them (pausing outlives a rebalance in franz-go), and forgets them.
func (s *Service) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	if marks := s.track.commitMarks(false, revoked); len(marks) > 0 {
		cl.CommitOffsetsSync(ctx, marks, s.commitDone)
	}
	s.onLost(ctx, cl, revoked)
}

// onLost ends the partitions' generation in the tracker (a record of theirs still being
// dispatched is no longer tracked, and no new hold is made for them), drops their holds and
// parked records, then resumes them.
func (s *Service) onLost(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	s.track.drop(lost)
	s.dropHeld(lost)
	s.dropParked(lost)
	s.orderLost(lost)
	cl.ResumeFetchPartitions(lost)
}
