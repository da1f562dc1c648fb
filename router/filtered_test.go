package router

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// filteredOf reads the filtered records of a batch as "messageId→destination:reason", checking
// each is a webhooks.attempts record keyed by its destination.
func filteredOf(t *testing.T, topic string, recs []*kgo.Record) []string {
	t.Helper()
	var out []string
	for _, r := range recs {
		a, err := schemas.DecodeAttemptRecord(r.Value)
		if err != nil || r.Topic != topic || string(r.Key) != a.DestinationID || a.ErrorClass != schemas.ClassFiltered || a.At == "" {
			t.Errorf("filtered record %s %s %s: %+v, %v", r.Topic, r.Key, r.Value, a, err)
		}
		s := a.MessageID + "→" + a.DestinationID + ":" + string(a.Reason)
		if a.Filter != "" {
			s += "/" + a.Filter
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// TestRouteWritesFilteredRecords: for each message dropped for a destination of its source the
// step writes one filtered record naming the reason — to every enabled destination of the
// source for the tracking plan and a suppressed user, to the one switched off by the
// integrations object — and none for a routed message, a disabled destination, an unknown
// source, or with no AttemptsTopic.
func TestRouteWritesFilteredRecords(t *testing.T) {
	cfg := mustConfig(t, routeYAML)
	step := Step{DeliveriesTopic: "out", AttemptsTopic: "attempts", Config: testConfig{cfg}, Suppressions: userSet{"bad": true},
		FirstAttemptAt: []byte("2026-11-27T10:00:00.000Z")}
	for _, c := range []struct {
		name, source, msg string
		want              Outcome
		filtered          []string
	}{
		{"routed", "web", `{"type":"track","event":"A","userId":"u","messageId":"m1"}`, Routed, nil},
		{"tracking plan", "web", `{"type":"track","event":"Debug Event","userId":"u","messageId":"m2"}`, BlockedByPlan,
			[]string{"m2→a-hooks:tracking_plan", "m2→b-hooks:tracking_plan"}},
		{"suppressed", "web", `{"type":"identify","userId":"bad","messageId":"m3"}`, Suppressed,
			[]string{"m3→a-hooks:suppressed", "m3→b-hooks:suppressed"}},
		{"all off", "web", `{"type":"identify","userId":"u","messageId":"m4","integrations":{"All":false}}`, NoDestination,
			[]string{"m4→a-hooks:integrations_off", "m4→b-hooks:integrations_off"}},
		{"one off", "app", `{"type":"identify","userId":"u","messageId":"m5","integrations":{"All":false,"Mixpanel":true}}`, NoDestination,
			[]string{"m5→a-hooks:integrations_off"}},
		{"unknown source", "gone", `{"type":"identify","userId":"u","messageId":"m6"}`, UnknownSource, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, o, err := step.Route(eventRecord(t, c.source, c.msg), Deliveries{})
			if o != c.want {
				t.Fatalf("outcome %s (%v), want %s", o, err, c.want)
			}
			if got := filteredOf(t, "attempts", out.Filtered); !slices.Equal(got, c.filtered) {
				t.Errorf("filtered records %v, want %v", got, c.filtered)
			}
			if out.Len() != len(out.DestinationIDs) {
				t.Errorf("%d deliveries, %d destination ids", out.Len(), len(out.DestinationIDs))
			}
		})
	}
	off := step
	off.AttemptsTopic = ""
	if out, o, _ := off.Route(eventRecord(t, "web", `{"type":"track","event":"Debug Event","userId":"u","messageId":"m2"}`), Deliveries{}); o != BlockedByPlan || len(out.Filtered) != 0 {
		t.Errorf("without an attempts topic: outcome %s, %d filtered records", o, len(out.Filtered))
	}
	dup := step.Filter(Deliveries{}, "web", "m7", schemas.FilterDuplicate)
	if got, want := filteredOf(t, "attempts", dup.Filtered), []string{"m7→a-hooks:duplicate", "m7→b-hooks:duplicate"}; !slices.Equal(got, want) {
		t.Errorf("duplicate: %v, want %v", got, want)
	}
}

// TestFilteredRecordsAbortWithTheirTransaction: the filtered records are produced in the
// routing transaction, with the deliveries. The first transaction of the test's pipe fails (a
// record too large beside the batch's own) and is aborted: a read_committed reader never sees
// its filtered records, though they were written (a read_uncommitted reader sees them); the
// batch is routed again and each filtered record is seen once.
func TestFilteredRecordsAbortWithTheirTransaction(t *testing.T) {
	env := servicetest.New(t, servicetest.Options{Config: routeYAML})
	cfg := DefaultConfig()
	cfg.DedupeWindow = 0
	cfg.TransactionalID = fmt.Sprintf("filtered-test-%d", time.Now().UnixNano())
	s, err := New(cfg, Deps{Deps: platform.Deps{Kafka: env.Kafka, KafkaOpts: env.KafkaOpts, Logger: env.Logger},
		Config: func() Snapshot { return env.Store.Snapshot() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.producer.Close(); s.lag.Close() }) // Run's, which the test does not call
	env.Start("suppressions", s.sup.Run)
	env.Start("keys", s.keys.Run)
	var batches atomic.Int32
	pipe, err := platform.NewPipe(platform.PipeConfig{
		Name: "filtered test", Kafka: env.Kafka, Group: cfg.Group, Topics: []string{cfg.EventsTopic},
		ExactlyOnce: true, TransactionalID: cfg.TransactionalID, TransactionTimeout: cfg.TransactionTimeout,
		Ready: []<-chan struct{}{env.Store.Ready(), s.sup.Ready(), s.keys.Ready()}, Logger: env.Logger, Opts: env.KafkaOpts,
		Transform: func(ctx context.Context, fs kgo.Fetches) ([]*kgo.Record, error) {
			out, err := s.routeBatch(ctx, fs)
			if batches.Add(1) == 1 { // fails the first transaction
				out = append(out, &kgo.Record{Topic: cfg.DeliveriesTopic, Value: make([]byte, 2<<20)})
			}
			return out, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	env.Produce(
		eventRecord(t, "web", `{"type":"track","event":"Order Completed","userId":"u1","messageId":"routed"}`),
		eventRecord(t, "web", `{"type":"track","event":"Debug Event","userId":"u1","messageId":"blocked"}`),
		eventRecord(t, "app", `{"type":"identify","userId":"u2","messageId":"off","integrations":{"Webhooks":false}}`),
	)
	env.Start("pipe", pipe.Run)
	committed := env.Reader(schemas.TopicAttempts)
	committed.Settle = 500 * time.Millisecond
	want := []string{"blocked→a-hooks:tracking_plan", "blocked→b-hooks:tracking_plan", "off→a-hooks:integrations_off"}
	if got := filteredOf(t, schemas.TopicAttempts, committed.WaitFor(len(want), 20*time.Second)); !slices.Equal(got, want) {
		t.Fatalf("committed filtered records %v, want each of %v once", got, want)
	}
	if n := batches.Load(); n < 2 {
		t.Fatalf("%d batches routed: the first transaction did not abort", n)
	}
	all := env.NewClient(kgo.ConsumeTopics(schemas.TopicAttempts), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	var written []*kgo.Record
	servicetest.Eventually(t, 10*time.Second, "the aborted transaction's records read uncommitted", func() bool {
		ctx, cancel := context.WithTimeout(env.Ctx, 200*time.Millisecond)
		defer cancel()
		all.PollFetches(ctx).EachRecord(func(r *kgo.Record) { written = append(written, r) })
		return len(written) >= 2*len(want)
	})
	if got := filteredOf(t, schemas.TopicAttempts, written); len(got) != 2*len(want) {
		t.Errorf("written uncommitted: %v, want each of %v twice (aborted, then committed)", got, want)
	}
}

// BenchmarkRouteFiltered is the routing step of a message every destination's integrations
// switch turns off: one filtered record per destination (BenchmarkRoute is a routed one, which
// writes none).
func BenchmarkRouteFiltered(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("%ddest", n), func(b *testing.B) {
			step, _ := benchStep(b, n)
			step.AttemptsTopic = "attempts"
			rec := eventRecord(b, "web", `{"type":"track","event":"Order Completed","userId":"user-12345","messageId":"0b3f6c1e-5b7e-4a8e-9f0c-2f1d3e4c5b6a","properties":{"total":129.99},"integrations":{"All":false}}`)
			out := Deliveries{Filtered: make([]*kgo.Record, 0, n)}
			b.ReportAllocs()
			for b.Loop() {
				out, _, _ = step.Route(rec, out.Reset())
			}
			if len(out.Filtered) != n {
				b.Fatalf("%d filtered records, want %d", len(out.Filtered), n)
			}
		})
	}
}
