package platform

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tributary-cdp/tributary/schemas"
)

// Writes to the config topic are serialized across every writer — each console replica,
// `tributary-init apply` and `reencrypt` — by one transactional id per config topic
// (docs/console.md#more-than-one-console). A write is one transaction:
//
//  1. a new producer takes the transactional id (InitProducerID): every older holder is
//     fenced, and its open transaction, if any, aborted;
//  2. it lists the topic's last stable offsets: the end of every committed write;
//  3. the writer reads the topic up to them (read_committed) and checks its conditions (the
//     console's If-Match versions, a config file's origin rules) against what it read;
//  4. it produces its records and commits.
//
// A write that another writer fenced between 1 and 4 fails to commit; it is retried from 1
// (a few times, with a back-off), so that its checks see the other write. Two writers can
// therefore never both pass a check against the same state: Kafka has no compare-and-set,
// but it fences.

// ConfigWriterID is the transactional id every writer of topic uses: "tributary-config-writer"
// for schemas.TopicConfig, "tributary-config-writer-<topic>" for another config topic (so
// that installations, or tests, sharing a cluster under other topic names do not fence each
// other).
func ConfigWriterID(topic string) string {
	if topic == schemas.TopicConfig {
		return "tributary-config-writer"
	}
	return "tributary-config-writer-" + topic
}

// ConfigTxTimeout is the transaction timeout of a config write: a writer that dies in the
// middle of one holds back the config topic's read_committed readers for at most this long,
// or until the next write fences it. A write, a large file's apply included, is one
// transaction and must end within it.
const ConfigTxTimeout = 30 * time.Second

// configTxAttempts bounds how often a fenced write is tried again.
const configTxAttempts = 10

// ErrConfigWriteContended is returned by WriteConfig when other writers fenced every attempt
// of a write: try again later.
var ErrConfigWriteContended = errors.New("other writers of the config kept fencing this write: try again")

// ConfigTx is one config write in progress (WriteConfig): the producer holds the transactional
// id, every older writer is fenced, and Ends are the offsets up to which the write must read
// the topic so that its checks see every committed write.
type ConfigTx struct {
	w     ConfigWriter
	cl    *kgo.Client
	topic string
	ends  map[int32]int64
	n     int  // records produced
	done  bool // committed
	// last is, by partition, the offset of the last record produced; pid the producer id that
	// wrote them (confirmCommitted looks for its marker after them).
	last map[int32]int64
	pid  int64
}

// Ends returns, by partition, the config topic's last stable offsets once this write had
// fenced every other: reading (read_committed) up to them sees every committed write. The map
// is the transaction's: do not modify it.
func (tx *ConfigTx) Ends() map[int32]int64 { return tx.ends }

// Produce writes recs to the config topic in this transaction, in order, and returns their
// offsets once Kafka acknowledged them (they are visible only once the write commits). A
// record with a nil Value is a tombstone.
func (tx *ConfigTx) Produce(ctx context.Context, recs ...schemas.ConfigRecord) ([]int64, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		krs[i] = &kgo.Record{Topic: tx.topic, Key: []byte(r.Key), Value: r.Value}
	}
	if err := tx.cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		return nil, fmt.Errorf("producing to %s: %w", tx.topic, err)
	}
	tx.n += len(recs)
	offsets := make([]int64, len(krs))
	for i, r := range krs {
		offsets[i] = r.Offset
		if tx.last == nil {
			tx.last = map[int32]int64{}
		}
		if last, ok := tx.last[r.Partition]; !ok || r.Offset > last {
			tx.last[r.Partition] = r.Offset
		}
		tx.pid = r.ProducerID
	}
	return offsets, nil
}

// Object reads the config topic up to its last stable offsets (read_committed, at least up to
// Ends) and returns the object of key as the last committed record left it, decrypted with
// the writer's CONFIG_ENCRYPTION_KEY; false when it does not exist. Records of other keys are
// not decoded. It is the read of a read-modify-write of one object by a service that holds no
// config store of its own that it could wait for (the deliverer's auto-disable).
func (tx *ConfigTx) Object(ctx context.Context, key string) (schemas.ConfigObject, bool, error) {
	keys, err := tx.w.Kafka.ConfigKeyring()
	if err != nil {
		return schemas.ConfigObject{}, false, err
	}
	var last *kgo.Record
	r, err := NewTopicReader(TopicReaderConfig{
		Kafka: tx.w.Kafka, Topic: tx.topic, Logger: tx.w.Logger, ReadCommitted: true, NoWait: true, Opts: tx.w.Opts,
		Apply: func(r *kgo.Record) {
			if string(r.Key) == key {
				last = r
			}
		},
	})
	if err == nil {
		err = r.Run(ctx)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return schemas.ConfigObject{}, false, fmt.Errorf("reading %s: %w", tx.topic, err)
	}
	if last == nil || len(last.Value) == 0 {
		return schemas.ConfigObject{}, false, nil
	}
	o, err := schemas.DecodeConfigRecordWith(key, last.Value, keys)
	if err != nil {
		return schemas.ConfigObject{}, false, fmt.Errorf("reading %s: %w", tx.topic, err)
	}
	return o, true, nil
}

// Commit commits the records produced so far, once: write may call it to know, before it
// returns, that its records are committed (the console waits for its store to apply them);
// otherwise Write commits after write returns. An error that IsFenced says another writer
// fenced this one, or that the transaction ended aborted: returned by write, it makes Write
// run write again.
//
// Commit returns once the transaction's marker in the config topic says it committed
// (confirmCommitted): franz-go's EndTransaction(TryCommit) can end a transaction with an abort
// and still return nil (docs/console.md#more-than-one-console).
func (tx *ConfigTx) Commit(ctx context.Context) error { return tx.CommitWaiting(ctx, nil) }

// CommitWaiting is Commit that runs wait (when not nil) while it reads the transaction's
// marker back, and returns once both are done: the console waits there for its config store to
// apply the write, so that its answer is the first snapshot that holds it, as soon as it does.
// wait's context is cancelled once the marker says abort (CommitWaiting then returns an error
// that IsFenced). With nothing produced, or once committed, it only runs wait.
func (tx *ConfigTx) CommitWaiting(ctx context.Context, wait func(ctx context.Context)) error {
	if tx.done || tx.n == 0 {
		if wait != nil {
			wait(ctx)
		}
		return nil
	}
	if err := tx.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("writing %s: committing: %w", tx.topic, err)
	}
	var err error
	if wait == nil {
		err = tx.confirmCommitted(ctx)
	} else {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		confirmed := make(chan error, 1)
		go func() {
			err := tx.confirmCommitted(ctx)
			if err != nil {
				cancel()
			}
			confirmed <- err
		}()
		wait(wctx)
		err = <-confirmed
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", tx.topic, err)
	}
	tx.done = true
	return nil
}

// errAbortedAtCommit says that a transaction EndTransaction(TryCommit) had ended without an
// error was aborted: its records are not applied anywhere, and the write may run again.
//
// franz-go (v1.22) does that when the client does not yet list the partition its records went
// to: a client's first records for a topic wait until its metadata arrives, and
// Client.storePartitionsUpdate (pkg/kgo/topics_and_partitions.go) hands them to the broker
// before it stores the topic's partitions; if the broker acknowledges them and the transaction
// ends before that store, EndTransaction finds no partition in the transaction, concludes that
// no produce succeeded, and ends it with an abort (KIP-890) instead of the commit, returning nil.
// Each config write has a client of its own, so each write's records are such first records.
var errAbortedAtCommit = errors.New("the transaction ended aborted although its commit was acknowledged")

// confirmCommitted reads the config topic after the last record this transaction produced in
// each partition, up to the transaction's marker (the first control record of its producer
// id; Kafka writes it once the transaction ends), and returns errAbortedAtCommit if a marker
// says abort. It waits at most ConfigTxTimeout for the markers.
func (tx *ConfigTx) confirmCommitted(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ConfigTxTimeout)
	defer cancel()
	from := make(map[int32]kgo.Offset, len(tx.last))
	for p, last := range tx.last {
		from[p] = kgo.NewOffset().At(last + 1)
	}
	// read_uncommitted, with control records: the marker itself is what is read.
	opts := append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tx.topic: from}), kgo.KeepControlRecords(),
		kgo.FetchMaxWait(ConfigFetchMaxWait),
	}, tx.w.Opts...)
	cl, err := NewKafkaClient(tx.w.Kafka, tx.w.Logger, opts...)
	if err != nil {
		return fmt.Errorf("confirming the commit: %w", err)
	}
	defer cl.Close()
	pending := maps.Clone(tx.last)
	for len(pending) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("confirming the commit: no marker of the transaction after offsets %v: %w", pending, err)
		}
		var aborted error
		fs.EachError(func(_ string, p int32, err error) {
			tx.w.Logger.Warn().Err(err).Str("topic", tx.topic).Int32("partition", p).Msg("confirming a config write's commit: fetch error; retrying")
		})
		fs.EachRecord(func(r *kgo.Record) {
			if _, ok := pending[r.Partition]; !ok || !r.Attrs.IsControl() || r.ProducerID != tx.pid {
				return
			}
			delete(pending, r.Partition)
			var key kmsg.ControlRecordKey
			if err := key.ReadFrom(r.Key); err != nil {
				aborted = fmt.Errorf("confirming the commit: the marker at offset %d of partition %d does not decode: %w", r.Offset, r.Partition, err)
			} else if key.Type != kmsg.ControlRecordKeyTypeCommit && aborted == nil {
				aborted = fmt.Errorf("%w (its marker at offset %d of partition %d is an abort)", errAbortedAtCommit, r.Offset, r.Partition)
			}
		})
		if aborted != nil {
			return aborted
		}
	}
	return nil
}

// ConfigWriter writes to a config topic through its transactional id (ConfigWriterID). The
// zero Opts and Logger are fine; Kafka and Topic are required. It holds no client between
// writes: each write takes the transactional id anew, which is what fences the others.
type ConfigWriter struct {
	Kafka  KafkaSettings
	Topic  string
	Logger zerolog.Logger
	// Opts are added last to the options of each write's client (tests: a client id).
	Opts []kgo.Opt
}

// Write runs write in a transaction (see ConfigTx): write reads the topic up to tx.Ends(),
// checks, and produces with tx.Produce. If write returns an error, the transaction is
// aborted and Write returns that error; if it produced nothing, nothing is committed. A
// write fenced by another writer before it committed is run again from the start (write
// must therefore be repeatable, and read again what it checks), up to a few times with a
// back-off; then ErrConfigWriteContended. Write returns once the commit is acknowledged.
// Safe for concurrent use (each call has its own client).
func (w ConfigWriter) Write(ctx context.Context, write func(ctx context.Context, tx *ConfigTx) error) error {
	b := backoff.NewExponentialBackOff()
	// Randomized (backoff's default ±50 %), so that two writers that fenced each other do not
	// try again in step.
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 25*time.Millisecond, time.Second, 0
	tries := 0
	err := backoff.RetryNotify(func() error {
		tries++
		err := w.once(ctx, write)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return backoff.Permanent(ctx.Err())
		case !IsFenced(err):
			return backoff.Permanent(err)
		case tries >= configTxAttempts:
			return backoff.Permanent(fmt.Errorf("writing %s: %w (%w)", w.Topic, ErrConfigWriteContended, err))
		}
		return err
	}, backoff.WithContext(b, ctx), func(err error, next time.Duration) {
		w.Logger.Info().Err(err).Str("topic", w.Topic).Int("try", tries).Dur("retry_in", next).
			Msg("a config write did not commit (another writer fenced it, or it ended aborted); reading the config again")
	})
	return err
}

// IsFenced reports whether err says that another producer took the transactional id, that the
// broker aborted the transaction, or that it ended aborted although its commit returned no
// error (ConfigTx.Commit): the write did not commit and may be tried again with a new producer.
func IsFenced(err error) bool {
	return errors.Is(err, errAbortedAtCommit) || errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidProducerIDMapping) || errors.Is(err, kerr.TransactionAbortable) ||
		errors.Is(err, kerr.InvalidTxnState) || errors.Is(err, kerr.ConcurrentTransactions)
}

// once is one attempt of Write, with a client of its own.
func (w ConfigWriter) once(ctx context.Context, write func(ctx context.Context, tx *ConfigTx) error) (err error) {
	opts := append([]kgo.Opt{
		kgo.TransactionalID(ConfigWriterID(w.Topic)), kgo.TransactionTimeout(ConfigTxTimeout),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(ConfigTxTimeout),
	}, w.Opts...)
	cl, err := NewKafkaClient(w.Kafka, w.Logger, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	// Take the transactional id: every older producer of it is fenced from here on, and the
	// transaction it left open is aborted (or, if it is committing, completed first).
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return fmt.Errorf("writing %s: taking the transactional id %s: %w", w.Topic, ConfigWriterID(w.Topic), err)
	}
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, w.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("writing %s: listing its last stable offsets: %w", w.Topic, err)
	}
	tx := &ConfigTx{w: w, cl: cl, topic: w.Topic, ends: map[int32]int64{}}
	ends.Each(func(o kadm.ListedOffset) { tx.ends[o.Partition] = o.Offset })
	if err := cl.BeginTransaction(); err != nil {
		return fmt.Errorf("writing %s: beginning a transaction: %w", w.Topic, err)
	}
	err = write(ctx, tx)
	if tx.done {
		return err // committed: nothing to abort
	}
	if err != nil || tx.n == 0 {
		// Abort under a context of its own: ctx may be what ended the write. Closing the
		// client without ending would leave the transaction to the next writer (which
		// aborts it) or to the transaction timeout.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if aerr := cl.AbortBufferedRecords(actx); aerr == nil {
			if aerr = cl.EndTransaction(actx, kgo.TryAbort); aerr != nil && err == nil {
				err = fmt.Errorf("writing %s: aborting: %w", w.Topic, aerr)
			}
		}
		return err
	}
	return tx.Commit(ctx)
}
