package platform

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
