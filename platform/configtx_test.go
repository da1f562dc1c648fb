package platform_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/embedded"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/schemas"
)

// sourceRecord is the config record of a source named name.
func sourceRecord(t *testing.T, id, name string) schemas.ConfigRecord {
	t.Helper()
	src := schemas.Source{ID: id, Name: name, WriteKey: "wk_test_" + id}
	rec, err := src.Record()
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// committedNames reads topic to its last stable offsets (read_committed) and returns, in
// order, "<key>=<source name>" of every committed record.
func committedNames(t *testing.T, ctx context.Context, s platform.KafkaSettings, topic string) []string {
	t.Helper()
	var out []string
	r, err := platform.NewTopicReader(platform.TopicReaderConfig{Kafka: s, Topic: topic, Logger: zerolog.Nop(), ReadCommitted: true,
		Apply: func(r *kgo.Record) {
			o, err := schemas.DecodeConfigRecord(string(r.Key), r.Value)
			if err != nil || o.Source == nil {
				out = append(out, string(r.Key)+"=?")
				return
			}
			out = append(out, string(r.Key)+"="+o.Source.Name)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(ctx); err != nil {
		t.Fatalf("reading %s: %v", topic, err)
	}
	return out
}

// configTopic creates a one-partition compacted config topic for the test.
func configTopic(t *testing.T, ctx context.Context, s platform.KafkaSettings) string {
	t.Helper()
	_, adm := newClient(t, s)
	topic := kafkatest.UniqueTopic(t, "config")
	if err := platform.EnsureTopics(ctx, adm, s.ReplicationFactor, []platform.TopicSpec{{Name: topic, Partitions: 1, Compact: true}}); err != nil {
		t.Fatalf("EnsureTopics: %v", err)
	}
	return topic
}

// testConfigWriterFences: a writer that another writer fenced between its read and its commit
// does not commit; it runs again, and that run's ends cover the other writer's record, so a
// check it makes sees that write. Nothing of the fenced attempt is ever read.
func testConfigWriterFences(t *testing.T, s platform.KafkaSettings) {
	ctx := testCtx(t, 60*time.Second)
	topic := configTopic(t, ctx, s)
	w := platform.ConfigWriter{Kafka: s, Topic: topic, Logger: zerolog.New(zerolog.NewTestWriter(t))}

	var ends []map[int32]int64
	err := w.Write(ctx, func(ctx context.Context, tx *platform.ConfigTx) error {
		ends = append(ends, tx.Ends())
		name := fmt.Sprintf("a%d", len(ends))
		if _, err := tx.Produce(ctx, sourceRecord(t, "a", name)); err != nil {
			return err
		}
		if len(ends) == 1 {
			// Another writer takes the transactional id and commits before this one does.
			if err := w.Write(ctx, func(ctx context.Context, tx *platform.ConfigTx) error {
				_, err := tx.Produce(ctx, sourceRecord(t, "b", "b1"))
				return err
			}); err != nil {
				t.Fatalf("the other writer: %v", err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	// Twice: once fenced, once committed. More runs are allowed: a run may also end uncommitted
	// with an error Write tries again (IsFenced: a commit franz-go ended as an abort, a broker
	// still completing the other writer's transaction), as a third run did once under -race on
	// a loaded machine. What must hold is what the runs committed.
	if len(ends) < 2 {
		t.Fatalf("the fenced write ran %d times, want 2 (once fenced, once committed)", len(ends))
	}
	last := len(ends) - 1
	if ends[last][0] <= ends[0][0] {
		t.Errorf("the committed run's ends %v do not cover the other writer's record (first run: %v)", ends[last], ends[0])
	}
	got := committedNames(t, ctx, s, topic)
	if want := []string{"source/b=b1", fmt.Sprintf("source/a=a%d", len(ends))}; !slices.Equal(got, want) {
		t.Errorf("committed records = %v, want %v (the runs that did not commit, never)", got, want)
	}
}

// testConfigWriteKilled: a writer killed in the middle of its transaction (its client closed
// without ending it), and one whose context is cancelled after it produced, leave nothing that
// a config store applies; the next write fences the open transaction and is applied at once.
func testConfigWriteKilled(t *testing.T, s platform.KafkaSettings) {
	ctx := testCtx(t, 60*time.Second)
	topic := configTopic(t, ctx, s)
	store := runStoreReady(t, s, topic)
	w := platform.ConfigWriter{Kafka: s, Topic: topic, Logger: zerolog.Nop()}

	// Killed: a producer of the writers' transactional id produces and never ends.
	killed, err := platform.NewKafkaClient(s, zerolog.Nop(), kgo.TransactionalID(platform.ConfigWriterID(topic)),
		kgo.TransactionTimeout(platform.ConfigTxTimeout))
	if err != nil {
		t.Fatal(err)
	}
	if err := killed.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	rec := sourceRecord(t, "killed", "killed")
	if err := killed.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(rec.Key), Value: rec.Value}).FirstErr(); err != nil {
		t.Fatalf("producing in the killed transaction: %v", err)
	}
	killed.Close()

	// Cancelled: its context ends once it has produced.
	cctx, cancel := context.WithCancel(ctx)
	err = w.Write(cctx, func(ctx context.Context, tx *platform.ConfigTx) error {
		if _, err := tx.Produce(ctx, sourceRecord(t, "cancelled", "cancelled")); err != nil {
			return err
		}
		cancel()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled write: %v, want context.Canceled", err)
	}

	if err := w.Write(ctx, func(ctx context.Context, tx *platform.ConfigTx) error {
		_, err := tx.Produce(ctx, sourceRecord(t, "next", "next"))
		return err
	}); err != nil {
		t.Fatalf("the next write: %v", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	snap, err := store.WaitFor(wctx, func(sn *platform.Snapshot) bool { _, ok := sn.SourceByID("next"); return ok })
	if err != nil {
		t.Fatal("the config store did not apply the write after the killed and cancelled ones")
	}
	for _, id := range []string{"killed", "cancelled"} {
		if _, ok := snap.SourceByID(id); ok {
			t.Errorf("the config store applied the %s write", id)
		}
	}
	if got, want := committedNames(t, ctx, s, topic), []string{"source/next=next"}; !slices.Equal(got, want) {
		t.Errorf("committed records = %v, want %v", got, want)
	}
}

// TestConfigStoreReadThrough: a snapshot reads through the ends a writer lists once it applied
// the write before them (the transaction's marker included), not before.
func TestConfigStoreReadThrough(t *testing.T) {
	s := platform.KafkaSettings{Brokers: kafkatest.Embedded(t), ReplicationFactor: -1, Partitions: 3}
	ctx := testCtx(t, 30*time.Second)
	topic := configTopic(t, ctx, s)
	store := runStoreReady(t, s, topic)
	w := platform.ConfigWriter{Kafka: s, Topic: topic, Logger: zerolog.Nop()}
	var first map[int32]int64
	if err := w.Write(ctx, func(ctx context.Context, tx *platform.ConfigTx) error {
		first = tx.Ends()
		_, err := tx.Produce(ctx, sourceRecord(t, "a", "a"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !store.Snapshot().ReadThrough(first) {
		t.Errorf("the store's snapshot does not read through the empty topic's ends %v", first)
	}
	var second map[int32]int64
	if err := w.Write(ctx, func(ctx context.Context, tx *platform.ConfigTx) error {
		second = tx.Ends()
		return nil // writes nothing
	}); err != nil {
		t.Fatal(err)
	}
	if second[0] != 2 { // the record and its commit marker
		t.Fatalf("ends after one committed record = %v, want partition 0 at 2", second)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	snap, err := store.WaitFor(wctx, func(sn *platform.Snapshot) bool { return sn.ReadThrough(second) })
	if err != nil {
		t.Fatal("the store never read through the commit marker")
	}
	if _, ok := snap.SourceByID("a"); !ok {
		t.Error("a snapshot that reads through the write does not hold it")
	}
}

// TestConfigCommitEndedAborted: a transaction whose commit returned no error but that ended
// aborted (franz-go's EndTransaction(TryCommit) can end one so, ConfigTx.Commit) is not a
// write that succeeded: Write finds its abort marker, runs the write again, and returns once a
// commit is in the topic. Here the broker turns the first commit into an abort, which the
// client acknowledges as it acknowledges the commit.
func TestConfigCommitEndedAborted(t *testing.T) {
	t.Run("Commit", func(t *testing.T) { testConfigCommitEndedAborted(t, false) })
	t.Run("CommitWaiting", func(t *testing.T) { testConfigCommitEndedAborted(t, true) })
}

// testConfigCommitEndedAborted is TestConfigCommitEndedAborted through Commit, or through
// CommitWaiting (waiting: the wait of the aborted attempt is cancelled, the other's runs).
func testConfigCommitEndedAborted(t *testing.T, waiting bool) {
	b, err := embedded.Start(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	s := platform.KafkaSettings{Brokers: b.Addrs(), ReplicationFactor: -1, Partitions: 1}
	ctx := testCtx(t, 30*time.Second)
	topic := configTopic(t, ctx, s)
	var turned atomic.Bool
	b.Cluster().ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if end := req.(*kmsg.EndTxnRequest); end.Commit && !turned.Swap(true) {
			end.Commit = false
			b.Cluster().DropControl()
		}
		return nil, nil, false // the broker handles the request (aborts the first commit)
	})
	w := platform.ConfigWriter{Kafka: s, Topic: topic, Logger: zerolog.Nop()}
	runs, waited := 0, map[int]string{}
	if err := w.Write(ctx, func(ctx context.Context, tx *platform.ConfigTx) error {
		runs++
		if _, err := tx.Produce(ctx, sourceRecord(t, "a", fmt.Sprintf("a%d", runs))); err != nil {
			return err
		}
		if !waiting {
			return tx.Commit(ctx)
		}
		run := runs
		return tx.CommitWaiting(ctx, func(ctx context.Context) {
			if run > 1 {
				waited[run] = "ran"
				return
			}
			select { // the aborted attempt: until its wait is cancelled
			case <-ctx.Done():
				waited[run] = "cancelled"
			case <-time.After(10 * time.Second):
				waited[run] = "not cancelled"
			}
		})
	}); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if want := map[int]string{1: "cancelled", 2: "ran"}; waiting && !maps.Equal(waited, want) {
		t.Errorf("waits: %v, want %v", waited, want)
	}
	if !turned.Load() {
		t.Fatal("no commit reached the broker")
	}
	if runs != 2 {
		t.Errorf("the write ran %d times, want 2 (once more after the commit that ended aborted)", runs)
	}
	if got, want := committedNames(t, ctx, s, topic), []string{"source/a=a2"}; !slices.Equal(got, want) {
		t.Errorf("committed records = %v, want %v", got, want)
	}
}
