package servicetest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/embedded"
	"github.com/tributary-cdp/tributary/schemas"
)

// Broker starts a fresh embedded broker (kfake) on a free loopback port that the test can
// stop: closeBroker closes it (once; it is a no-op after the first call, and runs on cleanup
// if the test has not called it). Tests that take Kafka away from a service use it; the
// others use kafkatest.Embedded or New.
func Broker(t testing.TB) (brokers []string, closeBroker func()) {
	t.Helper()
	b, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatalf("starting embedded broker: %v", err)
	}
	closeBroker = sync.OnceFunc(b.Close)
	t.Cleanup(closeBroker)
	return b.Addrs(), closeBroker
}

// StopWithin sends a run its stop signal (stop: a context's cancel, a SIGTERM) and waits for
// done to yield what the run returned. It fails the test with t.Fatalf if nothing came within
// limit of the stop; else it returns how long after the stop signal it came, and what.
// what names the run in the failure ("Run", "the deliverer").
func StopWithin(t testing.TB, what string, stop func(), done <-chan error, limit time.Duration) (took time.Duration, err error) {
	t.Helper()
	start := time.Now()
	stop()
	select {
	case err := <-done:
		return time.Since(start), err
	case <-time.After(limit):
		t.Fatalf("%s did not stop within %v of the stop signal", what, limit)
		return 0, nil
	}
}

// Go runs run in a goroutine with a context of the Env's, which stop cancels; done yields
// what run returned, once. Unlike Start it neither waits nor reports an error: the test
// stops the run and judges its result itself (StopWithin). On cleanup the run is cancelled
// and waited for, if the test has not done so.
func (e *Env) Go(run func(context.Context) error) (stop context.CancelFunc, done <-chan error) {
	ctx, cancel := context.WithCancel(e.Ctx)
	result := make(chan error, 1)
	finished := make(chan struct{})
	go func() { defer close(finished); result <- run(ctx) }()
	e.T.Cleanup(func() { cancel(); <-finished })
	return cancel, result
}

// DeleteRecords deletes the records of topic's partitions (every partition when none is
// named) up to their end offsets now, as retention deletes expired records: each such
// partition's start offset becomes its end offset.
func DeleteRecords(t testing.TB, ctx context.Context, adm *kadm.Client, topic string, partitions ...int32) {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("listing end offsets of %s: %v", topic, err)
	}
	del := ends.Offsets()
	if len(partitions) > 0 {
		del = kadm.Offsets{}
		for _, p := range partitions {
			o, _ := ends.Lookup(topic, p)
			del.AddOffset(topic, p, o.Offset, -1)
		}
	}
	resp, err := adm.DeleteRecords(ctx, del)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("deleting records of %s: %v", topic, err)
	}
}

// Binary opens a test of a service's real binary: it skips the test in -short mode, saying
// why, and builds the main package pkg (Build), returning the binary's path.
func Binary(t testing.TB, pkg, why string) string {
	t.Helper()
	if testing.Short() {
		t.Skip(why)
	}
	return Build(t, pkg)
}

// ServiceEnv is the environment of a service process (Spawn) that reaches brokers and serves
// its metrics on a free port, plus env ("KEY=value").
func ServiceEnv(brokers []string, env ...string) []string {
	return append([]string{"KAFKA_BROKERS=" + strings.Join(brokers, ","), "METRICS_ADDR=127.0.0.1:0"}, env...)
}

// EventRecord is a tracking.events record the way ingest writes it: the message msg (JSON,
// which must decode and validate) with its source, message id and type headers; sourceID ""
// leaves the source header out.
func EventRecord(t testing.TB, sourceID, msg string) *kgo.Record {
	t.Helper()
	m, err := schemas.DecodeMessage([]byte(msg))
	if err != nil {
		t.Fatalf("decoding message: %v", err)
	}
	if err := m.Validate(); err != nil {
		t.Fatalf("validating message: %v", err)
	}
	r := &kgo.Record{Topic: schemas.TopicEvents, Key: []byte(m.Key()), Value: m.AppendJSON(nil)}
	if sourceID != "" {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: schemas.HeaderSourceID, Value: []byte(sourceID)})
	}
	r.Headers = append(r.Headers,
		kgo.RecordHeader{Key: schemas.HeaderMessageID, Value: []byte(m.MessageID)},
		kgo.RecordHeader{Key: schemas.HeaderType, Value: []byte(m.Type)})
	return r
}

// Connect is what a test of a part below a service needs of a broker: its settings (brokers,
// ReplicationFactor -1, 3 partitions), a client of it (closed on cleanup) and a warn-level
// logger to the test's output.
func Connect(t testing.TB, brokers []string) (platform.KafkaSettings, *kgo.Client, zerolog.Logger) {
	t.Helper()
	logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	kafka := platform.KafkaSettings{Brokers: brokers, ReplicationFactor: -1, Partitions: 3}
	cl, err := platform.NewKafkaClient(kafka, logger)
	if err != nil {
		t.Fatalf("creating Kafka client: %v", err)
	}
	t.Cleanup(cl.Close)
	return kafka, cl, logger
}
