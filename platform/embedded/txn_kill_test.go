package embedded_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/embedded"
)

const (
	txnTopic = "txn.kill.test"
	txnID    = "txn-kill-test"
)

// txnChild runs in the child process: it commits a transaction ("committed"), then writes
// "in-flight" in a second transaction that it never ends, says so, and waits to be killed.
func txnChild(t *testing.T, dir string) {
	b, err := embedded.Start(embedded.Options{DataDir: dir})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, b, kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(txnTopic))
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, txnTopic); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	for _, v := range []string{"committed", "in-flight"} {
		if err := cl.BeginTransaction(); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		if err := cl.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		if v == "committed" {
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				fmt.Println("error:", err)
				os.Exit(1)
			}
		}
	}
	fmt.Println("filled")
	time.Sleep(time.Minute) // until killed
}

// TestKillMidTransaction: the broker is SIGKILLed while a transaction is open (the harness's
// broker-kill with a router mid-transaction). On restart that transaction is aborted, and
// its log must end as Kafka's does, with an abort marker: read to their last stable offset,
// the partitions are read to the end (ReadCommittedRange, the router's de-duplication restore,
// used to wait forever for a record the read_committed fetch never returns), and the
// producer's next, committed transactions are read (without the marker, a read_committed
// consumer fetching across the aborted records dropped them as aborted too).
func TestKillMidTransaction(t *testing.T) {
	if dir := os.Getenv("EMBEDDED_TXN_KILL_CHILD_DIR"); dir != "" {
		txnChild(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := killedChild(t, "TestKillMidTransaction", "EMBEDDED_TXN_KILL_CHILD_DIR")

	b := start(t, embedded.Options{DataDir: dir})
	settings := platform.DefaultKafkaSettings()
	settings.Brokers = b.Addrs()
	read := func(what string, want ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var got []string
		err := platform.ReadCommittedRange(ctx, settings, zerolog.Nop(), nil, txnTopic, []int32{0}, 0, func(r *kgo.Record) {
			got = append(got, string(r.Value))
		})
		if err != nil {
			t.Fatalf("%s: ReadCommittedRange: %v (read %q)", what, err, got)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: read %q, want %q", what, got, want)
		}
	}
	read("after the restart", "committed")

	// The same transactional producer goes on after the restart.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := newClient(t, b, kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(txnTopic))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("after")).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	read("after the next transaction", "committed", "after")

	// A consumer that reads across the aborted records, in one fetch, gets everything
	// committed.
	cons := newClient(t, b, kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{txnTopic: {0: kgo.NewOffset().AtStart()}}))
	var got []string
	for len(got) < 2 {
		pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
		fs := cons.PollFetches(pctx)
		timedOut := pctx.Err() != nil
		pcancel()
		if timedOut {
			break
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if want := []string{"committed", "after"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed consumer read %q, want %q", got, want)
	}
}
