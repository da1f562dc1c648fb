package console

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
)

// A tail is how the console's views read Kafka: topics from chosen offsets (the last 24 h of
// attempts, the last records of the event topics, the whole deletion topics), every
// partition, without a consumer group (every console replica reads everything), committed
// records only. ready is closed once everything written before the start was applied.
type tail struct {
	name   string
	topics []string
	// start returns the offset to start at in each partition; nil: the start of the topic.
	start func(ctx context.Context, adm *kadm.Client, ends kadm.ListedOffsets) (map[string]map[int32]int64, error)
	// apply is called for every record (control records left out), from Run's goroutine.
	apply func(r *kgo.Record)
	// polled, when set, is called after each poll's records were applied.
	polled func()
	ready  chan struct{}
}

// runTail reads t until ctx is done.
func (s *Service) runTail(ctx context.Context, t *tail) error {
	logger := s.logger.With().Str("view", t.name).Logger()
	adm, err := platform.NewKafkaClient(s.deps.Kafka, logger, s.deps.KafkaOpts...)
	if err != nil {
		return fmt.Errorf("console %s: %w", t.name, err)
	}
	var starts map[string]map[int32]int64
	var ends kadm.ListedOffsets
	err = platform.RetryUntil(ctx, logger, "listing the offsets of "+fmt.Sprint(t.topics), func(ctx context.Context) error {
		a := kadm.NewClient(adm)
		var err error
		if ends, err = a.ListCommittedOffsets(ctx, t.topics...); err == nil {
			err = ends.Error()
		}
		for _, topic := range t.topics {
			if _, ok := ends[topic]; !ok && err == nil {
				err = fmt.Errorf("topic %s does not exist yet", topic)
			}
		}
		if err != nil {
			return err
		}
		if t.start == nil {
			lo, err := a.ListStartOffsets(ctx, t.topics...)
			if err == nil {
				err = lo.Error()
			}
			starts = map[string]map[int32]int64{}
			lo.Each(func(o kadm.ListedOffset) {
				if starts[o.Topic] == nil {
					starts[o.Topic] = map[int32]int64{}
				}
				starts[o.Topic][o.Partition] = o.Offset
			})
			return err
		}
		starts, err = t.start(ctx, a, ends)
		return err
	})
	adm.Close()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	consume := map[string]map[int32]kgo.Offset{}
	remaining := map[string]map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		start, ok := starts[o.Topic][o.Partition]
		if !ok || start < 0 {
			start = o.Offset
		}
		if consume[o.Topic] == nil {
			consume[o.Topic], remaining[o.Topic] = map[int32]kgo.Offset{}, map[int32]int64{}
		}
		consume[o.Topic][o.Partition] = kgo.NewOffset().At(start)
		if start < o.Offset {
			remaining[o.Topic][o.Partition] = o.Offset
		}
	})
	cl, err := platform.NewKafkaClient(s.deps.Kafka, logger, append([]kgo.Opt{
		kgo.ConsumePartitions(consume),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(platform.ConfigFetchMaxWait),
	}, s.deps.KafkaOpts...)...)
	if err != nil {
		return fmt.Errorf("console %s: %w", t.name, err)
	}
	defer cl.Close()
	var readyOnce sync.Once
	caughtUp := func() {
		for _, ps := range remaining {
			if len(ps) > 0 {
				return
			}
		}
		readyOnce.Do(func() {
			logger.Info().Msg("view caught up")
			close(t.ready)
		})
	}
	caughtUp()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				logger.Warn().Err(err).Str("topic", topic).Int32("partition", p).Msg("fetching")
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if end, ok := remaining[r.Topic][r.Partition]; ok && r.Offset+1 >= end {
				delete(remaining[r.Topic], r.Partition)
			}
			if !r.Attrs.IsControl() {
				t.apply(r)
			}
		})
		if t.polled != nil {
			t.polled()
		}
		caughtUp()
	}
}
