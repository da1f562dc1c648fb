package platform

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Hanging transactions (docs/operations.md#hanging-transactions).
//
// Apache Kafka, killed while a transaction was open and restarted, aborts that transaction —
// but it can miss writing the abort marker to one of the transaction's partitions: the
// coordinator then says the transaction is complete, while the partition still holds its
// records as an open transaction, for good. The partition's last stable offset stays at the
// transaction's first record, so every read_committed reader of it stops there: the deliverer
// reading webhooks.deliveries, the router restoring its de-duplication memory from
// router.dedupe (platform.ReadCommittedRange) — and, when the transaction committed offsets,
// every member of the consumer group, whose OffsetFetch waits for the transaction's pending
// offsets in __consumer_offsets. The reliability harness's broker-kill scenario caught it on
// Apache Kafka 4.4: both routers silent after the restart, waiting for their group's offsets,
// a third to a half of the acknowledged events never delivered.
//
// A transactional writer finds and ends the hanging transactions of its own transactional
// id: EndHangingTransactions, which every exactly-once Pipe runs in the background.

// HangingCheckInterval is how often an exactly-once Pipe looks for hanging transactions of its
// transactional id (a variable for the tests).
var HangingCheckInterval = 10 * time.Second

// consumerOffsetsTopic is Kafka's topic of the consumer groups' offsets.
const consumerOffsetsTopic = "__consumer_offsets"

// hangingMargin is how long past its transaction timeout an open transaction must be before
// it counts as hanging: Kafka's coordinator aborts a live transaction once its timeout passed,
// checking every 10 s (transaction.abort.timed.out.transaction.cleanup.interval.ms).
const hangingMargin = 15 * time.Second

// EndHangingTransactions aborts the transactions of txnID left open on partitions of topics
// that the transaction coordinator no longer tracks: the partition's open transaction is of
// txnID's producer id with an older epoch than the coordinator's — the coordinator has moved
// past it, which it only does once that transaction ended — while the coordinator is not
// ending a transaction (not PrepareCommit, PrepareAbort or PrepareEpochFence, whose markers
// carry the next epoch and may still be on their way), with the same producer id and epoch
// before and after the partitions are looked at, and its last write is older than timeout (the
// transaction timeout) plus a margin. No live transaction can match all of that. Each is
// ended with the marker the coordinator decided (commit, when it is CompleteCommit one epoch
// past the transaction's; else abort) written to the partition (WriteTxnMarkers, as Kafka's
// kafka-transactions.sh abort does; it needs the CLUSTER_ACTION permission) and logged. It
// returns how many it ended.
func EndHangingTransactions(ctx context.Context, cl *kgo.Client, txnID string, topics []string, timeout time.Duration, logger zerolog.Logger) (int, error) {
	adm := kadm.NewClient(cl)
	coordinator := func() (kadm.DescribedTransaction, bool, error) {
		described, err := adm.DescribeTransactions(ctx, txnID)
		if err != nil {
			return kadm.DescribedTransaction{}, false, err
		}
		t, ok := described[txnID]
		if !ok || t.Err != nil {
			return t, false, t.Err
		}
		switch t.State {
		case "Empty", "Ongoing", "CompleteCommit", "CompleteAbort":
			return t, true, nil
		}
		return t, false, nil // a transaction being ended: looked at again later
	}
	before, settled, err := coordinator()
	if err != nil || !settled {
		return 0, err
	}
	// The transaction's offsets too: a consumer group's offsets written in a hanging
	// transaction stay pending, and every OffsetFetch of the group (with RequireStable, as a
	// GroupTransactSession's) waits for them — both routers stopped there.
	listed, err := adm.ListTopics(ctx, append(slices.Clone(topics), consumerOffsetsTopic)...)
	if err != nil {
		return 0, err
	}
	producers, err := adm.DescribeProducers(ctx, listed.TopicsSet())
	if err != nil {
		return 0, err
	}
	cutoff := time.Now().Add(-timeout - hangingMargin).UnixMilli()
	var hanging []kadm.DescribedProducer
	producers.EachProducer(func(p kadm.DescribedProducer) {
		if p.ProducerID == before.ProducerID && p.CurrentTxnStartOffset >= 0 &&
			p.ProducerEpoch < before.ProducerEpoch && p.LastTimestamp < cutoff {
			hanging = append(hanging, p)
		}
	})
	if len(hanging) == 0 {
		return 0, nil
	}
	after, settled, err := coordinator()
	if err != nil || !settled || after.ProducerID != before.ProducerID || after.ProducerEpoch != before.ProducerEpoch {
		return 0, err
	}
	ended := 0
	var errs []error
	for _, p := range hanging {
		// The coordinator's decision, when it is known: with per-transaction epochs (Kafka 4's
		// transactions v2), CompleteCommit one epoch past the partition's is the commit of that
		// very transaction, whose commit marker is missing. Otherwise it is aborted, as
		// kafka-transactions.sh abort does: an older transaction ended before the coordinator
		// went on, and the ones Kafka leaves hanging were ended by a fence or a timeout.
		commit := after.State == "CompleteCommit" && p.ProducerEpoch == after.ProducerEpoch-1
		outcome := map[bool]string{true: "commit", false: "abort"}[commit]
		log := func(ev *zerolog.Event) *zerolog.Event {
			return ev.Str("transactional_id", txnID).Str("topic", p.Topic).Int32("partition", p.Partition).
				Int64("producer_id", p.ProducerID).Int16("producer_epoch", p.ProducerEpoch).Int64("first_offset", p.CurrentTxnStartOffset).
				Str("coordinator_state", after.State).Int16("coordinator_epoch", after.ProducerEpoch).
				Time("last_write", time.UnixMilli(p.LastTimestamp)).Str("marker", outcome)
		}
		if err := writeMarker(ctx, cl, p, commit); err != nil {
			log(logger.Warn().Err(err)).Msg("a hanging transaction holds back this partition's readers and could not be ended; abort it with kafka-transactions.sh abort (docs/operations.md#hanging-transactions)")
			errs = append(errs, err)
			continue
		}
		ended++
		log(logger.Warn()).Msg("ended a hanging transaction: Kafka left it open on this partition (no marker after a broker restart), holding back every read_committed reader")
	}
	return ended, errors.Join(errs...)
}

// writeMarker writes the commit or abort marker of p's open transaction to its partition's
// leader.
func writeMarker(ctx context.Context, cl *kgo.Client, p kadm.DescribedProducer, commit bool) error {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = p.ProducerID, p.ProducerEpoch, commit, p.CoordinatorEpoch
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = p.Topic, []int32{p.Partition}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	resp, err := req.RequestWith(ctx, cl.Broker(int(p.Leader)))
	if err != nil {
		return fmt.Errorf("writing the marker: %w", err)
	}
	for _, rm := range resp.Markers {
		for _, t := range rm.Topics {
			for _, part := range t.Partitions {
				if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
					return fmt.Errorf("writing the marker: %w", err)
				}
			}
		}
	}
	return nil
}
