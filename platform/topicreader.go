package platform

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// TopicReaderConfig configures a TopicReader. Topic and Apply are required.
type TopicReaderConfig struct {
	// Kafka are the settings of the reader's client.
	Kafka KafkaSettings
	// Topic is read, every partition, from its start.
	Topic string
	// Apply is called for every record read, in offset order within a partition, from Run's
	// goroutine.
	Apply func(r *kgo.Record)
	// Polled, when set, is called from Run's goroutine after the records of each poll were
	// applied, with whether the reader has caught up; the first call that says caughtUp comes
	// once everything written before Run started was applied (also on an empty topic, with no
	// records), and before Ready is closed. An error stops Run, which returns it.
	Polled func(caughtUp bool) error
	// Follow keeps reading after the reader caught up, until Run's context is done. False:
	// Run returns once caught up, and records written after Run started are not applied.
	Follow bool
	// NoWait makes Run return an error when it cannot list the topic's offsets (a missing
	// topic included), instead of waiting for the topic (see WaitEndOffsets).
	NoWait bool
	// Opts are added last to the client's options (e.g. kgo.FetchMaxWait,
	// kgo.FetchIsolationLevel).
	Opts []kgo.Opt
	// Logger receives the reader's warnings (and the client's, at warn and above).
	Logger zerolog.Logger
}

// TopicReader is the one reader of a whole topic, usually a compacted one (the config, the
// suppression list) or a dead-letter topic: every partition from its start, without a
// consumer group, so every replica reads everything. It knows the end offsets when it starts
// (WaitEndOffsets: partitions that are empty, or whose records were all compacted or deleted
// away, count as read) and reports once it has applied everything up to them: Ready, and
// Polled(true). Ready is safe for concurrent use; Run is called once.
type TopicReader struct {
	cfg       TopicReaderConfig
	ready     chan struct{}
	readyOnce sync.Once
	running   atomic.Bool
}

// NewTopicReader checks cfg; the client is created by Run and closed when it returns.
func NewTopicReader(cfg TopicReaderConfig) (*TopicReader, error) {
	if _, err := cfg.Kafka.ClientOpts(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", cfg.Topic, err)
	}
	if cfg.Topic == "" {
		return nil, errors.New("topic reader: no topic")
	}
	if cfg.Apply == nil {
		return nil, fmt.Errorf("reading %s: no apply function", cfg.Topic)
	}
	return &TopicReader{cfg: cfg, ready: make(chan struct{})}, nil
}

// Ready returns a channel that is closed once the reader has applied every record up to the
// end offsets it found when Run started.
func (tr *TopicReader) Ready() <-chan struct{} { return tr.ready }

// Run reads the topic until ctx is done (Follow) or until it caught up, then closes its client
// and returns nil. It returns an error if it cannot create its client, is called twice, cannot
// list the topic's offsets (see WaitEndOffsets, and NoWait), or Polled fails.
func (tr *TopicReader) Run(ctx context.Context) error {
	if tr.running.Swap(true) {
		return fmt.Errorf("reading %s: Run called twice", tr.cfg.Topic)
	}
	logger := tr.cfg.Logger
	opts := append([]kgo.Opt{
		kgo.ConsumeTopics(tr.cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, tr.cfg.Opts...)
	cl, err := NewKafkaClient(tr.cfg.Kafka, logger, opts...)
	if err != nil {
		return fmt.Errorf("reading %s: %w", tr.cfg.Topic, err)
	}
	defer cl.Close()

	var ends map[int32]int64
	if tr.cfg.NoWait {
		ends, err = listEnds(ctx, kadm.NewClient(cl), tr.cfg.Topic)
		if err != nil {
			err = fmt.Errorf("listing offsets of %s: %w", tr.cfg.Topic, err)
		}
	} else {
		ends, err = WaitEndOffsets(ctx, kadm.NewClient(cl), tr.cfg.Topic, logger)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	caughtUp := false
	polled := func() (bool, error) {
		first := !caughtUp && len(ends) == 0
		caughtUp = caughtUp || first
		if tr.cfg.Polled != nil {
			if err := tr.cfg.Polled(caughtUp); err != nil {
				return false, err
			}
		}
		if first {
			tr.readyOnce.Do(func() { close(tr.ready) })
		}
		return caughtUp && !tr.cfg.Follow, nil
	}
	if len(ends) == 0 {
		if done, err := polled(); done || err != nil {
			return err
		}
	}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				logger.Warn().Err(err).Str("topic", t).Int32("partition", p).Msg("fetching")
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			end, reading := ends[r.Partition]
			if reading && r.Offset+1 >= end {
				delete(ends, r.Partition)
			}
			if !tr.cfg.Follow && (!reading || r.Offset >= end) {
				return // written after Run started
			}
			tr.cfg.Apply(r)
		})
		if done, err := polled(); done || err != nil {
			return err
		}
	}
}

// readStallWarning is how long ReadCommittedRange waits for a record before it warns.
var readStallWarning = 30 * time.Second // a variable for the tests

// ReadCommittedRange reads partitions of topic up to their last stable offsets (what
// committed transactions wrote, control records left out), each from its start, or, with
// sinceMilli > 0, from its first record at or after that time, calling apply for each record
// in offset order per partition; it returns once every partition was read to that end. It is
// the restore of state kept on a topic (the router's de-duplication log, the audiences
// changelog): a state owner reads its partitions before it processes their first input. A
// broker that does not answer, or a topic that lacks one of the partitions, is retried with
// RetryUntil (logged as "listing the offsets of <topic>") until ctx ends.
func ReadCommittedRange(ctx context.Context, kafka KafkaSettings, logger zerolog.Logger, opts []kgo.Opt, topic string, partitions []int32, sinceMilli int64, apply func(*kgo.Record)) error {
	cl, err := NewKafkaClient(kafka, logger, append(slices.Clone(opts),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())...)
	if err != nil {
		return fmt.Errorf("reading %s: %w", topic, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var starts, ends kadm.ListedOffsets
	err = RetryUntil(ctx, logger, "listing the offsets of "+topic, func(ctx context.Context) error {
		var err error
		if sinceMilli > 0 {
			starts, err = adm.ListOffsetsAfterMilli(ctx, sinceMilli, topic)
		} else {
			starts, err = adm.ListStartOffsets(ctx, topic)
		}
		if err == nil {
			ends, err = adm.ListCommittedOffsets(ctx, topic)
		}
		if err == nil {
			err = errors.Join(starts.Error(), ends.Error())
		}
		for _, p := range partitions {
			_, sok := starts.Lookup(topic, p)
			_, eok := ends.Lookup(topic, p)
			if err == nil && (!sok || !eok) {
				err = fmt.Errorf("%s has no partition %d: it needs as many partitions as %s (tributary-init creates it)", topic, p, schemas.TopicEvents)
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	consume := map[int32]kgo.Offset{}
	remaining := map[int32]int64{}
	for _, p := range partitions {
		s, _ := starts.Lookup(topic, p)
		e, _ := ends.Lookup(topic, p)
		if s.Offset >= 0 && s.Offset < e.Offset {
			consume[p] = kgo.NewOffset().At(s.Offset)
			remaining[p] = e.Offset
		}
	}
	if len(consume) == 0 {
		return nil
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: consume})
	for len(remaining) > 0 {
		pctx, cancel := context.WithTimeout(ctx, readStallWarning)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		if fs.NumRecords() == 0 && pctx.Err() != nil {
			// Nothing for a while, short of the last stable offsets: a transaction Kafka left
			// hanging holds them (docs/operations.md#hanging-transactions); say so, keep waiting.
			logger.Warn().Str("topic", topic).Interface("waiting_for_offsets", remaining).Dur("for", readStallWarning).
				Msg("reading " + topic + " to its last stable offsets: no record for a while; a hanging transaction may hold them back")
			continue
		}
		fs.EachError(func(t string, p int32, err error) {
			logger.Warn().Err(err).Str("topic", t).Int32("partition", p).Msg("reading " + t + " to its end")
		})
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := remaining[r.Partition]
			if !ok {
				return
			}
			if r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
			if r.Offset >= end || r.Attrs.IsControl() {
				return
			}
			apply(r)
		})
	}
	return nil
}
