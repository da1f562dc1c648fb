package platform_test

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// TestPipeRidesOutABrokerOutageMidTransaction: the broker becomes unreachable in the middle of
// a transaction (after the transform, before the produce and the end), for longer than a
// produce may take. The router used to exit there ("ending a transaction: unable to dial"),
// taking the all-in-one binary down with it. Now the session is replaced after a back-off, the
// pipe reports not ready meanwhile, Run does not return, and once the broker is back every
// record arrives exactly once, and the pipe logs, once, at info, that it resumed
// (docs/operations.md#broker-outages).
func TestPipeRidesOutABrokerOutageMidTransaction(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds of real time")
	}
	e := newPipeEnv(t, kafkatest.Embedded(t))
	network := &servicetest.NetCut{}
	health := platform.NewHealth()
	var calls, handed, aborted atomic.Int64
	cutOnce := sync.OnceFunc(network.Cut)
	transform := func(ctx context.Context, fs kgo.Fetches) ([]*kgo.Record, error) {
		if calls.Add(1) == 3 { // the third batch: cut the network before it is produced
			cutOnce()
		}
		return e.copyTransform(ctx, fs)
	}
	var logs servicetest.Buffer
	p := e.pipe(true, transform, func(c *platform.PipeConfig) {
		c.Opts = append(c.Opts, kgo.Dialer(network.Dial))
		c.Logger = zerolog.New(&logs)
		c.ProduceTimeout = 2 * time.Second
		c.Health = health
		c.Ended = func(handedOn bool) {
			if handedOn {
				handed.Add(1)
			} else {
				aborted.Add(1)
			}
		}
	})
	stop, done := startPipe(t, p)
	stopped := false
	defer func() {
		if !stopped {
			stop()
			<-done
		}
	}()

	const n = 400
	for b := 0; b < n; b += 40 {
		e.produce("r"+strconv.Itoa(b/40)+"-", 40)
	}
	// The outage: wait until the pipe noticed (not ready), and keep it down a while longer.
	deadline := time.Now().Add(20 * time.Second)
	for ready, _ := health.Check(t.Context()); ready; ready, _ = health.Check(t.Context()) {
		if time.Now().After(deadline) {
			t.Fatal("the pipe never reported not ready during the outage")
		}
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("Run returned during the outage: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	select {
	case err := <-done:
		stopped = true
		t.Fatalf("Run returned during the outage: %v", err)
	case <-time.After(3 * time.Second):
	}
	network.Restore()

	counts := e.readOut(n)
	for v, c := range counts {
		if c != 1 {
			t.Errorf("%s arrived %d times, want once", v, c)
		}
	}
	if len(counts) != n {
		t.Errorf("%d distinct records arrived, want %d", len(counts), n)
	}
	if ready, report := health.Check(t.Context()); !ready {
		t.Errorf("not ready again after the outage: %+v", report)
	}
	select {
	case err := <-done:
		stopped = true
		t.Fatalf("Run returned: %v", err)
	default:
	}
	stop()
	stopped = true
	if err := <-done; err != nil {
		t.Errorf("Run after the outage and a stop: %v", err)
	}
	if n := strings.Count(logs.String(), "resumed after a Kafka outage"); n != 1 {
		t.Errorf("the pipe logged %d times that it resumed after the outage, want once; its log:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `"level":"info"`) || !strings.Contains(logs.String(), `"offsets":"`) {
		t.Errorf("the resume line has no level info or no offsets; the log:\n%s", logs.String())
	}
	// Ended: once per transformed batch, false for the one the outage aborted.
	if aborted.Load() == 0 || handed.Load()+aborted.Load() != calls.Load() {
		t.Errorf("Ended: %d handed on, %d not, for %d batches transformed", handed.Load(), aborted.Load(), calls.Load())
	}
}

// TestPipeOutageWithinProduceTimeout: the client loses the broker in the middle of a
// transaction for longer than its group session (the group is lost, as when the broker is
// killed and restarted) but shorter than ProduceTimeout, so the same session rides it out: the
// open transaction is aborted when it ends and the session goes on. Every record must still be
// handed on exactly once — records produced during the outage too. On the embedded broker and
// on Apache Kafka.
func TestPipeOutageWithinProduceTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds of real time")
	}
	kafkatest.Conformance(t, func(t *testing.T, brokers []string) {
		e := newPipeEnv(t, brokers)
		network := &servicetest.NetCut{}
		var calls atomic.Int64
		cutOnce := sync.OnceFunc(network.Cut)
		transform := func(ctx context.Context, fs kgo.Fetches) ([]*kgo.Record, error) {
			if calls.Add(1) == 3 { // the third batch: cut the network before it is produced
				cutOnce()
			}
			return e.copyTransform(ctx, fs)
		}
		var logs servicetest.Buffer
		txn := kafkatest.UniqueTopic(t, "txn")
		p := e.pipe(true, transform, func(c *platform.PipeConfig) {
			c.Opts = append(c.Opts, kgo.Dialer(network.Dial), kgo.SessionTimeout(6*time.Second))
			c.Logger = zerolog.New(io.MultiWriter(&logs, zerolog.NewTestWriter(t))).Level(zerolog.InfoLevel)
			c.ProduceTimeout = 30 * time.Second
			c.Group, c.TransactionalID, c.InstanceID = txn, txn, txn
		})
		stop, done := startPipe(t, p)
		defer func() { stop(); <-done }()

		const n = 400
		for b := 0; b < n; b += 40 {
			e.produce("r"+strconv.Itoa(b/40)+"-", 40)
		}
		for calls.Load() < 3 {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(5 * time.Second)
		e.produce("during-", 40)
		time.Sleep(5 * time.Second) // 10 s: past the 6 s session, within the 30 s produce timeout
		network.Restore()
		e.produce("after-", 40)

		counts := e.readOut(n + 80)
		for v, c := range counts {
			if c != 1 {
				t.Errorf("%s arrived %d times, want once", v, c)
			}
		}
		if len(counts) != n+80 {
			t.Errorf("%d distinct records arrived, want %d", len(counts), n+80)
		}
	})
}

// TestEndHangingTransactionsLeavesLiveOnesAlone: on both brokers, EndHangingTransactions
// finds nothing to abort for a transactional id whose transactions all ended, nor for one with
// a transaction in progress (the coordinator has it Ongoing), and that transaction then
// commits as usual. (The hanging transaction it aborts — Kafka's abort of a transaction open
// at a broker kill, without a marker on one of its partitions — is made by make reliability
// APACHE=1 RUN=broker-kill, docs/reliability.md#apache-kafka.)
func TestEndHangingTransactionsLeavesLiveOnesAlone(t *testing.T) {
	kafkatest.Conformance(t, func(t *testing.T, brokers []string) {
		e := newPipeEnv(t, brokers)
		txn := kafkatest.UniqueTopic(t, "txn")
		cl, err := platform.NewKafkaClient(e.kafka, e.logger, kgo.TransactionalID(txn), kgo.DefaultProduceTopic(e.out))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		var logs servicetest.Buffer
		logger := zerolog.New(&logs)
		for i, commit := range []bool{true, false} {
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(ctx, kgo.StringRecord("r"+strconv.Itoa(i))).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if commit {
				if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
					t.Fatal(err)
				}
			}
			// The last write is older than any timeout: only the coordinator's state and the
			// epochs keep a live transaction from being taken for a hanging one.
			n, err := platform.EndHangingTransactions(ctx, e.cl, txn, []string{e.out}, -time.Hour, logger)
			if err != nil || n != 0 {
				t.Fatalf("transaction %d (ended: %v): EndHangingTransactions = %d, %v, want 0, nil; log: %s", i, commit, n, err, logs.String())
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("the open transaction did not commit after the check: %v", err)
		}
		if got := e.readOut(2); got["r0"] != 1 || got["r1"] != 1 {
			t.Errorf("read committed %v, want r0 and r1 once", got)
		}
	})
}

// TestReadCommittedRangeWarnsWhenHeldBackByATransaction: a partition's last stable offset is
// held by an open transaction (B) and the record just below it belongs to an aborted one (A),
// whose marker comes after it — as around a transaction Kafka left hanging. A read_committed
// fetch returns no record short of the last stable offset, so ReadCommittedRange (the router's
// de-duplication restore) waits: it now warns while it waits, instead of waiting silently, and
// finishes once B ends. On the embedded broker and Apache Kafka.
func TestReadCommittedRangeWarnsWhenHeldBackByATransaction(t *testing.T) {
	defer platform.SetReadStallWarning(500 * time.Millisecond)()
	kafkatest.Conformance(t, func(t *testing.T, brokers []string) {
		e := newPipeEnv(t, brokers)
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		txn := func(name string) *kgo.Client {
			cl, err := platform.NewKafkaClient(e.kafka, e.logger, kgo.TransactionalID(kafkatest.UniqueTopic(t, name)),
				kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cl.Close)
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			return cl
		}
		produce := func(cl *kgo.Client, v string) {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: e.out, Partition: 0, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		a, b := txn("a"), txn("b")
		produce(a, "aborted")
		produce(b, "open")
		if err := a.EndTransaction(ctx, kgo.TryAbort); err != nil {
			t.Fatal(err)
		}
		// The coordinator writes A's abort marker after EndTransaction returns: until it is in
		// the partition, the last stable offset is A's record (0) and there is nothing to wait
		// for. Wait until B alone holds it (1), the state this test is about.
		adm := kadm.NewClient(e.cl)
		for lso := int64(-1); lso != 1; {
			offs, err := adm.ListCommittedOffsets(ctx, e.out)
			if err != nil {
				t.Fatal(err)
			}
			if o, ok := offs.Lookup(e.out, 0); ok {
				lso = o.Offset
			}
			if ctx.Err() != nil {
				t.Fatalf("the last stable offset stayed at %d, want 1", lso)
			}
			time.Sleep(10 * time.Millisecond)
		}
		var logs servicetest.Buffer
		done := make(chan error, 1)
		go func() {
			done <- platform.ReadCommittedRange(ctx, e.kafka, zerolog.New(&logs), nil, e.out, []int32{0}, 0, func(*kgo.Record) {})
		}()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(logs.String(), "a hanging transaction may hold them back") {
			select {
			case err := <-done:
				t.Fatalf("ReadCommittedRange returned (%v) with the last stable offset held back; want it waiting", err)
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatal("no warning while ReadCommittedRange waited")
			}
		}
		if err := b.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("ReadCommittedRange: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("ReadCommittedRange still waiting after the transaction ended")
		}
	})
}

// TestExactlyOncePipeLooksForHangingTransactions: an exactly-once pipe with group callbacks
// among its options (as the router's) looks for hanging transactions of its transactional id
// on the topics it writes, every HangingCheckInterval, while it runs (it once could not build
// its client for that, and never looked).
func TestExactlyOncePipeLooksForHangingTransactions(t *testing.T) {
	old := platform.HangingCheckInterval
	platform.HangingCheckInterval = 200 * time.Millisecond
	defer func() { platform.HangingCheckInterval = old }()
	e := newPipeEnv(t, kafkatest.Embedded(t))
	var logs servicetest.Buffer
	p := e.pipe(true, e.copyTransform, func(c *platform.PipeConfig) {
		c.Logger = zerolog.New(&logs).Level(zerolog.DebugLevel)
		c.Opts = append(c.Opts, kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {}))
	})
	stop := runPipe(t, p)
	e.produce("r", 10)
	e.readOut(10)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), `"ended":0,"topics":["`+e.out+`"],"message":"test pipe: looked for hanging transactions"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the pipe never looked for hanging transactions on %s; its log:\n%s", e.out, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(logs.String(), `"error"`) {
		t.Errorf("looking for hanging transactions failed; the log:\n%s", logs.String())
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
