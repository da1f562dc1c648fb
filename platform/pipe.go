package platform

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Transform turns one poll's records into the records a Pipe produces. Its side effects must
// be idempotent: after a crash, an aborted transaction or a stop before the commit, the same
// records are transformed again. It runs under the pipe's shutdown deadline (see
// PipeConfig.ShutdownTimeout), so work it started when the stop signal came may finish; it
// returns an error only when it cannot go on (its context ended, or a fault the pipe cannot
// retry), and the poll is then not committed.
type Transform func(ctx context.Context, fs kgo.Fetches) ([]*kgo.Record, error)

// Pipe defaults, used when the PipeConfig field is zero.
const (
	DefaultPipeMaxPollRecords = 1000
	DefaultPipeProduceTimeout = 30 * time.Second
)

// PipeConfig configures a Pipe. Group, Topics and Transform are required.
type PipeConfig struct {
	// Name names the pipe in errors and logs, e.g. "router events".
	Name string
	// Kafka are the settings of the pipe's client.
	Kafka KafkaSettings
	// Group is the consumer group; Topics the topics it consumes (from their start when the
	// group has no committed offset).
	Group  string
	Topics []string
	// Transform turns each poll into the records to produce.
	Transform Transform
	// ExactlyOnce runs each poll in a Kafka transaction (a GroupTransactSession with
	// TransactionalID and TransactionTimeout): the produced records and the consumed offsets
	// commit together or not at all. False: at least once: every produced record is
	// acknowledged before the offsets are committed, so a crash re-reads, never loses.
	ExactlyOnce        bool
	TransactionalID    string
	TransactionTimeout time.Duration
	// TransactionTopics are the topics the transactions write to (besides those the pipe has
	// produced to since it started): exactly once, they are looked at every
	// HangingCheckInterval for transactions of TransactionalID that Kafka left open after a
	// broker restart, which are ended with the coordinator's decision (EndHangingTransactions).
	TransactionTopics []string
	// InstanceID, when set, is the static group-member id: a restarted member takes its
	// predecessor's partitions back at once instead of waiting for its session to time out.
	InstanceID string
	// MaxPollRecords bounds one poll, hence one batch (one transaction); 0:
	// DefaultPipeMaxPollRecords.
	MaxPollRecords int
	// ProduceTimeout bounds producing one batch (kgo.RecordDeliveryTimeout, and each attempt's
	// context): at least once, an attempt that times out is retried with RetryUntil; exactly
	// once, the transaction is aborted, and one that cannot even end replaces the session.
	// 0: DefaultPipeProduceTimeout.
	ProduceTimeout time.Duration
	// ShutdownTimeout bounds the stop: once Run's context is done, the batch in progress
	// finishes (or aborts) within it, the group is left and the client closed (closing takes
	// up to about a second more when the broker is gone); whatever was not committed by then
	// is read again after a restart. 0: DefaultShutdownGrace.
	ShutdownTimeout time.Duration
	// Opts are added last to the client's options (tests use them; a service may set e.g.
	// kgo.SessionTimeout or a producer compression).
	Opts []kgo.Opt
	// Logger receives the pipe's warnings (and the client's, at warn and above).
	Logger zerolog.Logger
	// Ready channels are waited for before the first poll (a config store, a suppression
	// list); a stop before they are ready returns nil.
	Ready []<-chan struct{}
	// Health, when set, gets the component Name: not ready while a failed Kafka session is
	// being replaced (exactly once), ready again once a transaction commits.
	Health *Health
	// Ended, when set, is called after each batch the Transform was called for, from Run's
	// goroutine, with whether the batch was handed on: exactly once, its transaction
	// committed; at least once, Kafka acknowledged every record it produced (its offsets
	// are committed right after). False: its records will be read again (by this pipe or
	// by the partitions' next owner), so state the Transform kept for them must be dropped.
	// A transaction whose end failed counts as not handed on even if it did commit.
	Ended func(handedOn bool)
}

// Pipe is the one consume → transform → produce → commit loop of every service: a consumer
// group whose every poll is transformed into records that are handed on to the next topics,
// exactly once (in a Kafka transaction) or at least once (produce, wait for every
// acknowledgement, then commit). Offsets are only ever committed once the poll's records were
// acknowledged (docs/delivery.md). Run is called once; a Pipe is not otherwise used
// concurrently.
type Pipe struct {
	cfg PipeConfig
	// recovery logs when the pipe resumed after a Kafka outage (docs/operations.md#broker-outages).
	recovery *Recovery

	mu       sync.Mutex
	produced map[string]bool // the topics the pipe's transactions have written to
	// session is the client of the current transactional session (nil between sessions): the
	// hanging-transaction sweep sends its requests through it.
	sessionClient atomic.Pointer[kgo.Client]
}

// NewPipe checks cfg and fills in its defaults; the client is created by Run.
func NewPipe(cfg PipeConfig) (*Pipe, error) {
	if cfg.Name == "" {
		cfg.Name = "pipe " + cfg.Group
	}
	var errs []error
	if _, err := cfg.Kafka.ClientOpts(); err != nil {
		errs = append(errs, err)
	}
	if cfg.Group == "" {
		errs = append(errs, errors.New("no consumer group"))
	}
	if len(cfg.Topics) == 0 {
		errs = append(errs, errors.New("no topics"))
	}
	if cfg.Transform == nil {
		errs = append(errs, errors.New("no transform"))
	}
	if cfg.ExactlyOnce && cfg.TransactionalID == "" {
		errs = append(errs, errors.New("exactly once needs a transactional id"))
	}
	if cfg.MaxPollRecords < 0 || cfg.ProduceTimeout < 0 || cfg.ShutdownTimeout < 0 {
		errs = append(errs, errors.New("negative limit"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	if cfg.MaxPollRecords == 0 {
		cfg.MaxPollRecords = DefaultPipeMaxPollRecords
	}
	if cfg.ProduceTimeout == 0 {
		cfg.ProduceTimeout = DefaultPipeProduceTimeout
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = DefaultShutdownGrace
	}
	p := &Pipe{cfg: cfg, recovery: NewRecovery(cfg.Logger, cfg.Name), produced: map[string]bool{}}
	for _, t := range cfg.TransactionTopics {
		p.produced[t] = true
	}
	return p, nil
}

// Run consumes until ctx is done, then finishes or aborts the batch in progress within
// ShutdownTimeout and returns nil. It returns an error if its client cannot be created or a
// transform fails while ctx is not done; Kafka being unreachable, for any length of time, is
// ridden out (exactly once: a failed session is replaced, see runTransactional).
func (p *Pipe) Run(ctx context.Context) error {
	for _, r := range p.cfg.Ready {
		select {
		case <-r:
		case <-ctx.Done():
			return nil
		}
	}
	opts := []kgo.Opt{
		kgo.ConsumerGroup(p.cfg.Group),
		kgo.ConsumeTopics(p.cfg.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// A pipe hands on only what its producers committed.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(250 * time.Millisecond),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(1 << 20),
		kgo.RecordDeliveryTimeout(p.cfg.ProduceTimeout),
		kgo.WithHooks(p.recovery.Hook()),
	}
	if p.cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(p.cfg.InstanceID))
	}
	// The shutdown deadline: the batch in progress when ctx ends finishes under it.
	gctx, gcancel := GraceContext(ctx, p.cfg.ShutdownTimeout)
	defer gcancel()
	if p.cfg.ExactlyOnce {
		opts = append(opts, kgo.TransactionalID(p.cfg.TransactionalID), kgo.TransactionTimeout(p.cfg.TransactionTimeout))
		sweepCtx, stopSweeping := context.WithCancel(ctx)
		swept := make(chan struct{})
		go func() { defer close(swept); p.sweepHanging(sweepCtx) }()
		defer func() { stopSweeping(); <-swept }()
		return p.runTransactional(ctx, gctx, append(opts, p.cfg.Opts...))
	}
	opts = append(opts, kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll())
	return p.runAtLeastOnce(ctx, gctx, append(opts, p.cfg.Opts...))
}

// closer returns the function that leaves the group (waiting at most until gctx ends) and
// closes cl, once, however often it is called; it is also called when gctx ends, so that a
// produce, commit or leave that Kafka never answers fails instead of holding Run past the
// shutdown deadline. Run defers the returned release.
func closer(gctx context.Context, cl *kgo.Client) (closeOnce func(), release func()) {
	closeOnce = sync.OnceFunc(func() {
		cl.AllowRebalance()
		_ = cl.LeaveGroupContext(gctx)
		cl.Close()
	})
	stop := context.AfterFunc(gctx, closeOnce)
	return closeOnce, func() {
		stop()
		// Run has stopped polling: if the close above ran while a poll still blocked
		// rebalances, the leave it started waits for this.
		cl.AllowRebalance()
		closeOnce()
	}
}

// runTransactional runs transactional sessions until ctx is done. A session whose transaction
// cannot begin or end — the broker went away, the transactional id was fenced — is not
// retryable in itself (franz-go's GroupTransactSession.End): it is closed, its open transaction
// is aborted by the broker (the next session's producer id fences it), and a new session
// starts after a back-off (RetryUntil), resuming from the committed offsets. Meanwhile the pipe
// is not ready (PipeConfig.Health). Only a transform failure or a client that cannot be built
// ends Run with an error: a broker outage of any length is ridden out.
func (p *Pipe) runTransactional(ctx, gctx context.Context, opts []kgo.Opt) error {
	all, err := p.cfg.Kafka.clientOptsLogging(p.cfg.Logger, opts)
	if err != nil {
		return fmt.Errorf("%s: %w", p.cfg.Name, err)
	}
	what := p.cfg.Name + ": Kafka session failed; its transaction is aborted, and a new session resumes from the committed offsets"
	err = RetryUntil(ctx, p.cfg.Logger, what, func(context.Context) error {
		err := p.session(ctx, gctx, all)
		if err != nil && !isPermanent(err) {
			p.setReady(false)
			p.recovery.Failed(err)
		}
		return err
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// session runs one GroupTransactSession until ctx is done (nil) or it fails (an error;
// backoff.Permanent when a new session would not help).
func (p *Pipe) session(ctx, gctx context.Context, all []kgo.Opt) error {
	sess, err := kgo.NewGroupTransactSession(all...)
	if err != nil {
		return backoff.Permanent(fmt.Errorf("%s: creating Kafka client: %w", p.cfg.Name, err))
	}
	p.sessionClient.Store(sess.Client())
	defer p.sessionClient.Store(nil)
	// The session's own stop: the shutdown deadline, or, once it has failed, a few seconds for
	// leaving the group (the broker may be gone).
	sctx, scancel := context.WithCancel(gctx)
	defer scancel()
	_, release := closer(sctx, sess.Client())
	failed := func(err error) error {
		t := time.AfterFunc(failedSessionLeave, scancel)
		defer t.Stop()
		release()
		return err
	}
	for {
		fs := sess.PollRecords(ctx, p.cfg.MaxPollRecords)
		if ctx.Err() != nil || fs.IsClientClosed() {
			release()
			return nil
		}
		p.logFetchErrors(fs)
		if fs.NumRecords() == 0 {
			continue
		}
		p.recovery.Resumed(fs)
		if err := sess.Begin(); err != nil {
			return failed(fmt.Errorf("%s: beginning a transaction: %w", p.cfg.Name, err))
		}
		committed, err := p.transact(ctx, gctx, sess, fs)
		if err != nil {
			return failed(err)
		}
		if committed {
			p.setReady(true)
		}
	}
}

// sweepHanging ends, every HangingCheckInterval until ctx is done, the transactions of the
// pipe's transactional id that Kafka left open on the topics it writes to
// (EndHangingTransactions): one would hold back every read_committed reader of its partition
// for good. It runs beside the sessions, since a session may itself be held back by one (the
// router's de-duplication restore reads router.dedupe to its last stable offset), and sends its
// requests through the current session's client (between sessions it waits for the next).
func (p *Pipe) sweepHanging(ctx context.Context) {
	t := time.NewTicker(HangingCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		topics := make([]string, 0, len(p.produced))
		for topic := range p.produced {
			topics = append(topics, topic)
		}
		p.mu.Unlock()
		cl := p.sessionClient.Load()
		if len(topics) == 0 || cl == nil {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, HangingCheckInterval)
		n, err := EndHangingTransactions(actx, cl, p.cfg.TransactionalID, topics, p.cfg.TransactionTimeout, p.cfg.Logger)
		cancel()
		if ctx.Err() == nil {
			p.cfg.Logger.Debug().Err(err).Int("ended", n).Strs("topics", topics).Msg(p.cfg.Name + ": looked for hanging transactions")
		}
	}
}

// failedSessionLeave bounds leaving the group when a session failed: the broker may be gone.
const failedSessionLeave = 5 * time.Second

func isPermanent(err error) bool {
	var perm *backoff.PermanentError
	return errors.As(err, &perm)
}

func (p *Pipe) setReady(ready bool) {
	if p.cfg.Health != nil {
		p.cfg.Health.SetReady(p.cfg.Name, ready)
	}
}

// transact transforms one poll and produces its records in the open transaction, then
// commits it (or aborts it when a record failed, a rebalance took a partition away, or the
// transform stopped). It says whether the transaction committed; a transform failure is
// permanent (backoff.Permanent), a transaction that cannot end is not.
func (p *Pipe) transact(ctx, gctx context.Context, sess *kgo.GroupTransactSession, fs kgo.Fetches) (bool, error) {
	ectx, cancel := context.WithTimeout(gctx, p.cfg.ProduceTimeout)
	defer cancel()
	out, err := p.cfg.Transform(gctx, fs)
	if err != nil {
		p.ended(false)
		_, _ = sess.End(ectx, kgo.TryAbort) // the records are read again
		if err := p.transformFailed(ctx, err); err != nil {
			return false, backoff.Permanent(err)
		}
		return false, nil
	}
	p.mu.Lock()
	for _, r := range out {
		p.produced[r.Topic] = true
	}
	p.mu.Unlock()
	var failed atomic.Int64
	for _, r := range out {
		sess.Produce(ectx, r, func(r *kgo.Record, err error) {
			if err != nil && failed.Add(1) == 1 {
				p.cfg.Logger.Warn().Err(err).Str("topic", r.Topic).Msg("producing in a transaction; aborting it")
			}
		})
	}
	if err := sess.Client().Flush(ectx); err != nil {
		failed.Add(1)
	}
	committed, err := sess.End(ectx, kgo.TransactionEndTry(failed.Load() == 0))
	p.ended(committed && err == nil)
	if err != nil {
		if gctx.Err() != nil { // past the shutdown deadline: left to the next owner
			return false, nil
		}
		return false, fmt.Errorf("%s: ending a transaction: %w", p.cfg.Name, err)
	}
	if !committed {
		p.cfg.Logger.Info().Msg("transaction aborted (rebalance or produce failure); its records will be read again")
	}
	return committed, nil
}

func (p *Pipe) runAtLeastOnce(ctx, gctx context.Context, opts []kgo.Opt) error {
	cl, err := NewKafkaClient(p.cfg.Kafka, p.cfg.Logger, opts...)
	if err != nil {
		return fmt.Errorf("%s: %w", p.cfg.Name, err)
	}
	_, release := closer(gctx, cl)
	defer release()
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, p.cfg.MaxPollRecords)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		p.logFetchErrors(fs)
		if fs.NumRecords() > 0 {
			p.recovery.Resumed(fs)
			if err := p.handOn(ctx, gctx, cl, fs); err != nil {
				return err
			}
		}
		cl.AllowRebalance()
	}
	return nil
}

// handOn transforms one poll, produces its records until Kafka acknowledged every one, then
// commits the poll's offsets. Stopped before the acknowledgement, it commits nothing.
func (p *Pipe) handOn(ctx, gctx context.Context, cl *kgo.Client, fs kgo.Fetches) error {
	out, err := p.cfg.Transform(gctx, fs)
	if err != nil {
		p.ended(false)
		return p.transformFailed(ctx, err)
	}
	if len(out) > 0 {
		err := RetryUntil(gctx, p.cfg.Logger, "producing the batch of "+p.cfg.Name, func(actx context.Context) error {
			actx, cancel := context.WithTimeout(actx, p.cfg.ProduceTimeout)
			defer cancel()
			return ProduceAll(actx, cl, out)
		})
		if err != nil { // past the shutdown deadline: the poll is read again after a restart
			p.ended(false)
			return nil
		}
	}
	p.ended(true)
	if err := cl.CommitUncommittedOffsets(gctx); err != nil {
		p.cfg.Logger.Warn().Err(err).Msg("committing offsets; the batch may be handed on again")
	}
	return nil
}

func (p *Pipe) ended(handedOn bool) {
	if p.cfg.Ended != nil {
		p.cfg.Ended(handedOn)
	}
}

func (p *Pipe) transformFailed(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("%s: %w", p.cfg.Name, err)
}

func (p *Pipe) logFetchErrors(fs kgo.Fetches) {
	fs.EachError(func(t string, part int32, err error) {
		p.recovery.Failed(err)
		p.cfg.Logger.Warn().Err(err).Str("topic", t).Int32("partition", part).Msg("fetching")
	})
}
