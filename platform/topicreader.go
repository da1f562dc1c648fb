package platform

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// TopicReaderConfig configures a TopicReader: which topics and partitions, where it starts,
// whether it follows, what it reads (committed records only or all), and how it waits for
// its topics. Topic (or Topics) and Apply are required.
type TopicReaderConfig struct {
	// Kafka are the settings of the reader's client.
	Kafka KafkaSettings
	// Topic is read, every partition (see Partitions). Topics are read beside it: a reader
	// reads one topic or several, with one client.
	Topic  string
	Topics []string
	// Partitions, when set, are the only partitions read (of the one topic, Topic); each must
	// exist, or listing the offsets fails (and is waited for, see Retry). nil: every partition
	// of every topic.
	Partitions []int32

	// Start is where the reader starts in each partition: the zero value at its start (the
	// log start offset), StartAfter at a time, StartLast at its last records.
	Start Start

	// ReadCommitted reads what committed transactions wrote only (Kafka's read_committed), up
	// to the last stable offsets when Run starts: the end is then the last stable offset, not
	// the high watermark. The reader fetches the transactions' control records, so that a
	// partition whose last record is a commit marker is read to its end once it has seen that
	// marker, but never applies them. False: every record, up to the high watermarks.
	ReadCommitted bool

	// Apply is called for every record read (control records left out), in offset order
	// within a partition, from Run's goroutine.
	Apply func(r *kgo.Record)
	// Polled, when set, is called from Run's goroutine after the records of each poll were
	// applied, with whether the reader has caught up; the first call that says caughtUp comes
	// once everything written before Run started was applied (also on an empty topic, with no
	// records), and before Ready is closed. An error stops Run, which returns it.
	Polled func(caughtUp bool) error
	// Position, when set, is called from Run's goroutine with how far the reader has read each
	// partition: next is the offset of the next record to read (every record before it was
	// read or is gone). It is called once per partition it reads when Run starts (with where
	// it starts), then after each record, control records included (with its offset + 1),
	// before Apply. The config store uses it to tell when it has read a writer's ends
	// (ConfigTx.Ends).
	Position func(topic string, partition int32, next int64)
	// Follow keeps reading after the reader caught up, until Run's context is done. False:
	// Run returns once caught up, and records written after Run started are not applied.
	Follow bool

	// How Run waits for its topics' offsets. By default it waits while a topic does not exist
	// yet (logging "waiting for the topic") and fails on any other error after about ten
	// seconds of retries. NoWait: it fails at once on any error, a missing topic included.
	// Retry: it retries every error until Run's context is done (RetryUntil, logged as
	// "listing the offsets of <topics>; retrying"). At most one of them is set.
	NoWait bool
	Retry  bool

	// Opts are added last to the client's options (e.g. kgo.FetchMaxWait).
	Opts []kgo.Opt
	// Logger receives the reader's warnings (and the client's, at warn and above).
	Logger zerolog.Logger
}

// Start is where a TopicReader starts in each partition. The zero value starts at the
// partition's start.
type Start struct {
	after time.Time
	last  int64
	tail  bool // last is set
}

// StartAfter starts at each partition's first record at or after t (none: at its end).
func StartAfter(t time.Time) Start { return Start{after: t} }

// StartLast starts at each partition's last n records before its end (at its start if it holds
// fewer; n = 0: at its end).
func StartLast(n int64) Start { return Start{last: n, tail: true} }

// topics returns Topic and Topics, without duplicates.
func (c *TopicReaderConfig) topics() []string {
	var out []string
	for _, t := range append([]string{c.Topic}, c.Topics...) {
		if t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// TopicReader is the one loop that reads topics to their end and, if asked, follows them:
// the config and the suppression list (compacted, read whole by every replica), the
// dead-letter topics, the state restores of the router and audiences (ReadCommittedRange),
// the console's views. It reads without a consumer group, so every replica reads everything.
// It lists the offsets when it starts (partitions that are empty, or whose records were all
// compacted or deleted away, count as read) and reports once it has applied everything up to
// the ends it found: Ready, and Polled(true). Ready is safe for concurrent use; Run is called
// once. docs/architecture.md#reading-topics tells which service reads what, and how.
type TopicReader struct {
	cfg       TopicReaderConfig
	topics    []string
	ready     chan struct{}
	readyOnce sync.Once
	running   atomic.Bool
}

// NewTopicReader checks cfg; the client is created by Run and closed when it returns.
func NewTopicReader(cfg TopicReaderConfig) (*TopicReader, error) {
	topics := cfg.topics()
	name := strings.Join(topics, ", ")
	if _, err := cfg.Kafka.ClientOpts(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	switch {
	case len(topics) == 0:
		return nil, errors.New("topic reader: no topic")
	case cfg.Apply == nil:
		return nil, fmt.Errorf("reading %s: no apply function", name)
	case len(cfg.Partitions) > 0 && len(topics) > 1:
		return nil, fmt.Errorf("reading %s: partitions of several topics", name)
	case cfg.Start.last < 0:
		return nil, fmt.Errorf("reading %s: a negative number of last records (%d)", name, cfg.Start.last)
	case cfg.NoWait && cfg.Retry:
		return nil, fmt.Errorf("reading %s: both NoWait and Retry", name)
	}
	return &TopicReader{cfg: cfg, topics: topics, ready: make(chan struct{})}, nil
}

// Ready returns a channel that is closed once the reader has applied every record up to the
// end offsets it found when Run started.
func (tr *TopicReader) Ready() <-chan struct{} { return tr.ready }

// name is the reader's topics, for errors and logs.
func (tr *TopicReader) name() string { return strings.Join(tr.topics, ", ") }

// readStallWarning is how long a reader of committed records waits for a record, short of
// the last stable offsets, before it warns.
var readStallWarning = 30 * time.Second // a variable for the tests

// Run reads the topics until ctx is done (Follow) or until it caught up, then closes its
// client and returns nil. It returns an error if it cannot create its client, is called twice,
// cannot list the offsets (see NoWait and Retry), or Polled fails.
func (tr *TopicReader) Run(ctx context.Context) error {
	if tr.running.Swap(true) {
		return fmt.Errorf("reading %s: Run called twice", tr.name())
	}
	logger := tr.cfg.Logger
	// Control records are fetched (and never applied) at either isolation level: a partition
	// whose last record is a transaction's marker is read to its end once the marker is seen
	// (tributary.config is written in transactions, docs/console.md#more-than-one-console).
	opts := []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.KeepControlRecords()}
	if tr.cfg.ReadCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := NewKafkaClient(tr.cfg.Kafka, logger, append(opts, tr.cfg.Opts...)...)
	if err != nil {
		return fmt.Errorf("reading %s: %w", tr.name(), err)
	}
	defer cl.Close()

	consume, remaining, err := tr.waitOffsets(ctx, kadm.NewClient(cl))
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	caughtUp := false
	polled := func() (bool, error) {
		first := !caughtUp && len(remaining) == 0
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
	if len(remaining) == 0 {
		if done, err := polled(); done || err != nil {
			return err
		}
	}
	if tr.cfg.Position != nil {
		consume.Each(func(o kadm.Offset) { tr.cfg.Position(o.Topic, o.Partition, o.At) })
	}
	if tr.cfg.Start.after.IsZero() && !tr.cfg.Start.tail && len(tr.cfg.Partitions) == 0 {
		// Whole topics from their start: by topic, so that partitions added later (EnsureTopics
		// raises the counts) are read too, from their start.
		cl.AddConsumeTopics(tr.topics...)
	} else {
		cl.AddConsumePartitions(consume.KOffsets())
	}
	for {
		fs, stalled := tr.poll(ctx, cl, caughtUp)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		if stalled {
			// Nothing for a while, short of the last stable offsets: a transaction Kafka left
			// hanging holds them (docs/operations.md#hanging-transactions); say so, keep waiting.
			logger.Warn().Str("topic", tr.name()).Interface("waiting_for_offsets", atOffsets(remaining)).Dur("for", readStallWarning).
				Msg("reading " + tr.name() + " to its last stable offsets: no record for a while; a hanging transaction may hold them back")
			continue
		}
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				logger.Warn().Err(err).Str("topic", t).Int32("partition", p).Msg("fetching")
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			end, reading := remaining.Lookup(r.Topic, r.Partition)
			if reading && r.Offset+1 >= end.At {
				remaining.Delete(r.Topic, r.Partition)
			}
			if tr.cfg.Position != nil {
				tr.cfg.Position(r.Topic, r.Partition, r.Offset+1)
			}
			if r.Attrs.IsControl() || !tr.cfg.Follow && (!reading || r.Offset >= end.At) {
				return // a transaction's marker, or written after Run started
			}
			tr.cfg.Apply(r)
		})
		if done, err := polled(); done || err != nil {
			return err
		}
	}
}

// poll fetches once. A reader of committed records that has not caught up yet waits
// readStallWarning at most: stalled says that nothing came in that time.
func (tr *TopicReader) poll(ctx context.Context, cl *kgo.Client, caughtUp bool) (fs kgo.Fetches, stalled bool) {
	if caughtUp || !tr.cfg.ReadCommitted {
		return cl.PollFetches(ctx), false
	}
	pctx, cancel := context.WithTimeout(ctx, readStallWarning)
	defer cancel()
	fs = cl.PollFetches(pctx)
	return fs, ctx.Err() == nil && fs.NumRecords() == 0 && pctx.Err() != nil
}

// atOffsets is os's offsets by topic and partition, for a log.
func atOffsets(os kadm.Offsets) map[string]map[int32]int64 {
	out := map[string]map[int32]int64{}
	os.Each(func(o kadm.Offset) {
		if out[o.Topic] == nil {
			out[o.Topic] = map[int32]int64{}
		}
		out[o.Topic][o.Partition] = o.At
	})
	return out
}

// waitOffsets lists the offsets (listOffsets), waiting as NoWait and Retry say.
func (tr *TopicReader) waitOffsets(ctx context.Context, adm *kadm.Client) (consume, remaining kadm.Offsets, err error) {
	list := func(ctx context.Context) error {
		consume, remaining, err = tr.listOffsets(ctx, adm)
		return err
	}
	switch {
	case tr.cfg.NoWait:
		if err := list(ctx); err != nil {
			return nil, nil, fmt.Errorf("listing offsets of %s: %w", tr.name(), err)
		}
		return consume, remaining, nil
	case tr.cfg.Retry:
		err := RetryUntil(ctx, tr.cfg.Logger, "listing the offsets of "+tr.name(), list)
		return consume, remaining, err
	}
	for attempt := 0; ; attempt++ {
		err := list(ctx)
		if err == nil {
			return consume, remaining, nil
		}
		if !errors.Is(err, kerr.UnknownTopicOrPartition) && attempt >= 20 {
			return nil, nil, fmt.Errorf("listing offsets of %s: %w", tr.name(), err)
		}
		if attempt%10 == 0 {
			tr.cfg.Logger.Warn().Err(err).Str("topic", tr.name()).Msg("waiting for the topic")
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// listOffsets returns where the reader starts in each partition it reads (consume) and, of
// those with records to read before the end, that end (remaining): the high watermark, or the
// last stable offset when it reads committed records. A partition whose start is at or past
// its end has nothing to read; it is consumed only to be followed.
func (tr *TopicReader) listOffsets(ctx context.Context, adm *kadm.Client) (consume, remaining kadm.Offsets, err error) {
	list := adm.ListEndOffsets
	if tr.cfg.ReadCommitted {
		list = adm.ListCommittedOffsets
	}
	ends, err := list(ctx, tr.topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, err
	}
	starts, err := adm.ListStartOffsets(ctx, tr.topics...)
	if err == nil {
		err = starts.Error()
	}
	var after kadm.ListedOffsets
	if err == nil && !tr.cfg.Start.after.IsZero() {
		if after, err = adm.ListOffsetsAfterMilli(ctx, tr.cfg.Start.after.UnixMilli(), tr.topics...); err == nil {
			err = after.Error()
		}
	}
	if err != nil {
		return nil, nil, err
	}
	for _, t := range tr.topics {
		if len(ends[t]) == 0 || len(starts[t]) == 0 {
			return nil, nil, fmt.Errorf("topic %s: %w", t, kerr.UnknownTopicOrPartition)
		}
	}
	for _, p := range tr.cfg.Partitions {
		_, sok := starts.Lookup(tr.topics[0], p)
		_, eok := ends.Lookup(tr.topics[0], p)
		if !sok || !eok {
			return nil, nil, fmt.Errorf("%s has no partition %d: it needs as many partitions as %s (tributary-init creates it)", tr.topics[0], p, schemas.TopicEvents)
		}
	}
	consume, remaining = kadm.Offsets{}, kadm.Offsets{}
	ends.Each(func(e kadm.ListedOffset) {
		if len(tr.cfg.Partitions) > 0 && !slices.Contains(tr.cfg.Partitions, e.Partition) {
			return
		}
		at := e.Offset
		if s, ok := starts.Lookup(e.Topic, e.Partition); ok && s.Offset >= 0 {
			at = s.Offset
		}
		switch {
		case !tr.cfg.Start.after.IsZero():
			if a, ok := after.Lookup(e.Topic, e.Partition); ok && a.Offset >= 0 {
				at = max(at, a.Offset)
			} else {
				at = e.Offset
			}
		case tr.cfg.Start.tail:
			at = max(at, e.Offset-tr.cfg.Start.last)
		}
		if at < e.Offset {
			remaining.AddOffset(e.Topic, e.Partition, e.Offset, -1)
		}
		if at < e.Offset || tr.cfg.Follow {
			consume.AddOffset(e.Topic, e.Partition, at, -1)
		}
	})
	return consume, remaining, nil
}

// ReadCommittedRange reads partitions of topic up to their last stable offsets (what
// committed transactions wrote, control records left out), each from its start, or, with
// sinceMilli > 0, from its first record at or after that time, calling apply for each record
// in offset order per partition; it returns once every partition was read to that end. It is
// the restore of state kept on a topic (the router's de-duplication log, the audiences
// changelog): a state owner reads its partitions before it processes their first input. A
// broker that does not answer, or a topic that lacks one of the partitions, is retried with
// RetryUntil (logged as "listing the offsets of <topic>") until ctx ends, whose error it then
// returns. It is a TopicReader: ReadCommitted, Retry, not following.
func ReadCommittedRange(ctx context.Context, kafka KafkaSettings, logger zerolog.Logger, opts []kgo.Opt, topic string, partitions []int32, sinceMilli int64, apply func(*kgo.Record)) error {
	cfg := TopicReaderConfig{
		Kafka: kafka, Topic: topic, Partitions: partitions, ReadCommitted: true, Retry: true,
		Apply: apply, Opts: opts, Logger: logger,
	}
	if sinceMilli > 0 {
		cfg.Start = StartAfter(time.UnixMilli(sinceMilli))
	}
	if len(partitions) == 0 {
		return nil // nothing to read (a TopicReader would read every partition)
	}
	r, err := NewTopicReader(cfg)
	if err != nil {
		return err
	}
	if err := r.Run(ctx); err != nil {
		return err
	}
	select {
	case <-r.Ready():
		return nil
	default: // stopped before the end
		return ctx.Err()
	}
}
