package platform_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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

// pipeEnv is an embedded broker with an input and an output topic.
type pipeEnv struct {
	t       *testing.T
	kafka   platform.KafkaSettings
	cl      *kgo.Client
	in, out string
	logger  zerolog.Logger
}

func newPipeEnv(t *testing.T, brokers []string) *pipeEnv {
	t.Helper()
	e := &pipeEnv{t: t, in: kafkatest.UniqueTopic(t, "in"), out: kafkatest.UniqueTopic(t, "out")} // unique: Apache Kafka is shared
	e.kafka, e.cl, e.logger = servicetest.Connect(t, brokers)
	if _, err := kadm.NewClient(e.cl).CreateTopics(t.Context(), 3, 1, nil, e.in, e.out); err != nil {
		t.Fatal(err)
	}
	return e
}

// produce writes the records "<prefix><i>" for i in [0, n) to the input topic.
func (e *pipeEnv) produce(prefix string, n int) {
	e.t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := prefix + strconv.Itoa(i)
		recs[i] = &kgo.Record{Topic: e.in, Key: []byte(v), Value: []byte(v)}
	}
	if err := e.cl.ProduceSync(e.t.Context(), recs...).FirstErr(); err != nil {
		e.t.Fatal(err)
	}
}

// copyTransform hands every input record on to the output topic.
func (e *pipeEnv) copyTransform(_ context.Context, fs kgo.Fetches) ([]*kgo.Record, error) {
	var out []*kgo.Record
	fs.EachRecord(func(r *kgo.Record) {
		out = append(out, &kgo.Record{Topic: e.out, Key: r.Key, Value: r.Value})
	})
	return out, nil
}

func (e *pipeEnv) pipe(exactlyOnce bool, transform platform.Transform, mod func(*platform.PipeConfig)) *platform.Pipe {
	e.t.Helper()
	cfg := platform.PipeConfig{
		Name: "test pipe", Kafka: e.kafka, Group: "test-group", Topics: []string{e.in},
		Transform: transform, ExactlyOnce: exactlyOnce, MaxPollRecords: 40,
		ShutdownTimeout: 5 * time.Second, Logger: e.logger,
	}
	if exactlyOnce {
		cfg.TransactionalID, cfg.TransactionTimeout, cfg.InstanceID = "test-txn", 10*time.Second, "test-txn"
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := platform.NewPipe(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// readOut reads the committed records of the output topic until it has want of them (then a
// little longer, to catch extras) and counts them by value.
func (e *pipeEnv) readOut(want int) map[string]int {
	e.t.Helper()
	cl, err := platform.NewKafkaClient(e.kafka, e.logger, kgo.ConsumeTopics(e.out),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	counts, n := map[string]int{}, 0
	deadline, settle := time.Now().Add(30*time.Second), time.Time{}
	for {
		ctx, cancel := context.WithTimeout(e.t.Context(), 200*time.Millisecond)
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { counts[string(r.Value)]++; n++ })
		cancel()
		now := time.Now()
		if n >= want && settle.IsZero() {
			settle = now.Add(time.Second)
		}
		if !settle.IsZero() && now.After(settle) {
			return counts
		}
		if now.After(deadline) {
			e.t.Fatalf("read %d records from %s, want %d", n, e.out, want)
		}
	}
}

// pipeModes are the two delivery modes of a pipe, which the tests of stops run in.
var pipeModes = []struct {
	name        string
	exactlyOnce bool
}{{"at-least-once", false}, {"exactly-once", true}}

// startPipe runs p until stop is called; done yields what Run returned.
func startPipe(t *testing.T, p *platform.Pipe) (stop context.CancelFunc, done <-chan error) {
	ctx, stop := context.WithCancel(t.Context())
	result := make(chan error, 1)
	go func() { result <- p.Run(ctx) }()
	return stop, result
}

// runPipe runs p until the returned cancel, which returns what Run returned.
func runPipe(t *testing.T, p *platform.Pipe) (cancel func() error) {
	stop, done := startPipe(t, p)
	return func() error { stop(); return <-done }
}

// Records are handed on across a stop in the middle of a batch and a restart: at least once,
// every record arrives; exactly once, every record arrives once.
func TestPipeDeliversAcrossStopAndRestart(t *testing.T) {
	t.Parallel() // waits on processes, brokers and timeouts, not the CPU: overlaps with the others
	for _, tt := range pipeModes {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newPipeEnv(t, kafkatest.Embedded(t))
			const n = 300
			e.produce("a", n)

			// The first run is stopped while it transforms its third batch.
			ctx, stop := context.WithCancel(t.Context())
			var batches atomic.Int32
			first := e.pipe(tt.exactlyOnce, func(ctx context.Context, fs kgo.Fetches) ([]*kgo.Record, error) {
				if batches.Add(1) == 3 {
					stop()
				}
				return e.copyTransform(ctx, fs)
			}, nil)
			done := make(chan error, 1)
			go func() { done <- first.Run(ctx) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("first run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("first run did not stop")
			}
			if batches.Load() < 3 {
				t.Fatalf("first run transformed %d batches, want 3", batches.Load())
			}

			e.produce("b", n)
			stopSecond := runPipe(t, e.pipe(tt.exactlyOnce, e.copyTransform, nil))
			counts := e.readOut(2 * n)
			if err := stopSecond(); err != nil {
				t.Fatalf("second run: %v", err)
			}
			dups := 0
			for _, prefix := range []string{"a", "b"} {
				for i := range n {
					c := counts[prefix+strconv.Itoa(i)]
					if c == 0 {
						t.Errorf("record %s%d lost", prefix, i)
					}
					dups += max(c-1, 0)
				}
			}
			if len(counts) != 2*n {
				t.Errorf("read %d distinct records, want %d", len(counts), 2*n)
			}
			if tt.exactlyOnce && dups > 0 {
				t.Errorf("exactly once: %d duplicates", dups)
			}
			t.Logf("%d records in, %d duplicates out", 2*n, dups)
		})
	}
}

// A pipe whose broker disappears while it hands a batch on stops within its shutdown grace
// once its context is cancelled.
func TestPipeStopsWithinGraceWhenTheBrokerIsGone(t *testing.T) {
	t.Parallel() // waits on processes, brokers and timeouts, not the CPU: overlaps with the others
	for _, tt := range pipeModes {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			brokers, closeBroker := servicetest.Broker(t)
			e := newPipeEnv(t, brokers)
			e.produce("a", 100)
			transformed := make(chan struct{})
			var once atomic.Bool
			const grace = time.Second
			p := e.pipe(tt.exactlyOnce, func(ctx context.Context, fs kgo.Fetches) ([]*kgo.Record, error) {
				if once.CompareAndSwap(false, true) {
					closeBroker()
					close(transformed)
				}
				return e.copyTransform(ctx, fs)
			}, func(c *platform.PipeConfig) { c.ShutdownTimeout = grace })
			cancel, done := startPipe(t, p)
			select {
			case <-transformed:
			case <-time.After(30 * time.Second):
				t.Fatal("no batch was transformed")
			}
			time.Sleep(200 * time.Millisecond) // the produce is under way
			took, err := servicetest.StopWithin(t, fmt.Sprintf("Run (grace %s)", grace), cancel, done, grace+5*time.Second)
			t.Logf("stopped %s after the cancel (grace %s): %v", took, grace, err)
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Logf("Run returned %v", err)
			}
		})
	}
}
