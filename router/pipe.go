package router

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
)

// transform turns one poll's records into the records to produce. Its side effects must be
// idempotent: after a crash or an aborted transaction the same records are transformed again.
// It returns an error only when ctx is done.
type transform func(ctx context.Context, fs kgo.Fetches) ([]*kgo.Record, error)

// pipe is one consume-transform-produce loop over a consumer group: in a Kafka transaction per
// poll (exactly once), or produce-then-commit (at least once).
type pipe struct {
	name        string
	group       string
	topic       string
	exactlyOnce bool
	txnID       string
	txnTimeout  time.Duration
	maxPoll     int
	kafka       platform.KafkaSettings
	opts        []kgo.Opt
	logger      zerolog.Logger
	transform   transform
	// ready, when set, is waited for before the first poll.
	ready []<-chan struct{}
}

// endTimeout bounds producing and ending one transaction; past it the process is unhealthy
// and Run returns an error.
const endTimeout = 30 * time.Second

func (p *pipe) Run(ctx context.Context) error {
	for _, r := range p.ready {
		select {
		case <-r:
		case <-ctx.Done():
			return nil
		}
	}
	opts := append([]kgo.Opt{
		kgo.ConsumerGroup(p.group),
		// Static membership: a restarted router takes its predecessor's partitions back at once
		// instead of waiting for the dead member's session to time out.
		kgo.InstanceID(p.txnID),
		kgo.SessionTimeout(20 * time.Second),
		kgo.ConsumeTopics(p.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(250 * time.Millisecond),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(1 << 20),
	}, p.opts...)
	if p.exactlyOnce {
		return p.runTransactional(ctx, opts)
	}
	return p.runAtLeastOnce(ctx, opts)
}

func (p *pipe) runTransactional(ctx context.Context, opts []kgo.Opt) error {
	opts = append(opts,
		kgo.TransactionalID(p.txnID),
		kgo.TransactionTimeout(p.txnTimeout),
	)
	cfg := p.kafka
	sess, err := newGroupTransactSession(cfg, p.logger, opts...)
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	defer sess.Close()
	for {
		fs := sess.PollRecords(ctx, p.maxPoll)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		p.logFetchErrors(fs)
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("%s: beginning a transaction: %w", p.name, err)
		}
		out, err := p.transform(ctx, fs)
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endTimeout)
		if err != nil { // shutting down: abort, the records are read again
			_, _ = sess.End(ectx, kgo.TryAbort)
			cancel()
			return nil
		}
		var failed atomic.Int64
		for _, r := range out {
			sess.Produce(ectx, r, func(r *kgo.Record, err error) {
				if err != nil {
					if failed.Add(1) == 1 {
						p.logger.Warn().Err(err).Str("topic", r.Topic).Msg("producing in a transaction; aborting it")
					}
				}
			})
		}
		if err := sess.Client().Flush(ectx); err != nil {
			failed.Add(1)
		}
		committed, err := sess.End(ectx, kgo.TransactionEndTry(failed.Load() == 0))
		cancel()
		if err != nil {
			return fmt.Errorf("%s: ending a transaction: %w", p.name, err)
		}
		if !committed {
			p.logger.Info().Msg("transaction aborted (rebalance or produce failure); its records will be read again")
		}
	}
}

func (p *pipe) runAtLeastOnce(ctx context.Context, opts []kgo.Opt) error {
	opts = append(opts, kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll())
	cl, err := platform.NewKafkaClient(p.kafka, p.logger, opts...)
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	defer cl.Close()
	for {
		fs := cl.PollRecords(ctx, p.maxPoll)
		if ctx.Err() != nil || fs.IsClientClosed() {
			cl.AllowRebalance()
			return nil
		}
		p.logFetchErrors(fs)
		if fs.NumRecords() == 0 {
			cl.AllowRebalance()
			continue
		}
		out, err := p.transform(ctx, fs)
		if err != nil {
			cl.AllowRebalance()
			return nil
		}
		// Produce, wait for every acknowledgement, then commit: retried until Kafka takes the
		// batch or we stop (the uncommitted records are then read again by the next owner).
		for {
			err := produceAll(ctx, cl, out)
			if err == nil {
				break
			}
			p.logger.Warn().Err(err).Msg("producing; retrying the batch")
			select {
			case <-ctx.Done():
				cl.AllowRebalance()
				return nil
			case <-time.After(time.Second):
			}
		}
		if err := cl.CommitUncommittedOffsets(context.WithoutCancel(ctx)); err != nil {
			p.logger.Warn().Err(err).Msg("committing offsets; the batch may be routed again")
		}
		cl.AllowRebalance()
	}
}

func (p *pipe) logFetchErrors(fs kgo.Fetches) {
	fs.EachError(func(t string, part int32, err error) {
		p.logger.Warn().Err(err).Str("topic", t).Int32("partition", part).Msg("fetching")
	})
}

// produceAll produces recs and waits for all acknowledgements (at most endTimeout); it returns
// the first error.
func produceAll(ctx context.Context, cl *kgo.Client, recs []*kgo.Record) error {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), endTimeout)
	defer cancel()
	return platform.ProduceAll(pctx, cl, recs)
}

// newGroupTransactSession builds a franz-go GroupTransactSession for the settings, with the
// same connection options and logging as platform.NewKafkaClient.
func newGroupTransactSession(s platform.KafkaSettings, logger zerolog.Logger, opts ...kgo.Opt) (*kgo.GroupTransactSession, error) {
	base, err := s.ClientOpts()
	if err != nil {
		return nil, err
	}
	base = append(base, kgo.WithLogger(platform.NewKgoLogger(logger, kgo.LogLevelWarn)))
	return kgo.NewGroupTransactSession(append(base, opts...)...)
}
