package platform_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// Regulations reads tracking.suppressions (a tombstone lifts) and tracking.deletions.status
// (deleting kinds only, the latest processedAt), and is ready even when the status topic's
// last record is a transaction's commit marker (the router writes the status records in its
// transactions, exactly once). Once, Run returns after reading to the end.
func TestRegulationsRead(t *testing.T) {
	kafka, cl, logger := servicetest.Connect(t, kafkatest.Embedded(t))
	const sup, status = "t.suppressions", "t.deletions.status"
	if _, err := kadm.NewClient(cl).CreateTopics(t.Context(), 2, 1, nil, sup, status); err != nil {
		t.Fatal(err)
	}
	t1 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	statusRec := func(req, user, kind string, at time.Time) *kgo.Record {
		return &kgo.Record{Topic: status, Key: []byte(req), Value: schemas.DeletionStatus{RequestID: req, UserID: user, Kind: kind, ProcessedAt: schemas.FormatTimestamp(at)}.Record()}
	}
	if err := cl.ProduceSync(t.Context(),
		&kgo.Record{Topic: sup, Key: []byte("u-sup"), Value: []byte(`{}`)},
		&kgo.Record{Topic: sup, Key: []byte("u-lifted"), Value: []byte(`{}`)},
		&kgo.Record{Topic: sup, Key: []byte("u-lifted")},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	txn, err := platform.NewKafkaClient(kafka, logger, kgo.TransactionalID("t-regulations"), kgo.DefaultProduceTopic(status))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(t.Context(),
		statusRec("r1", "u-del", schemas.KindDeleteOnly, t1),
		statusRec("r2", "u-del", schemas.KindSuppressWithDelete, t1.Add(time.Hour)),
		statusRec("r3", "u-del", schemas.KindDeleteOnly, t1), // an older one read later: the latest stays
		statusRec("r4", "u-only-sup", schemas.KindSuppressOnly, t1),
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(t.Context(), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	for _, once := range []bool{false, true} {
		g, err := platform.NewRegulations(platform.RegulationsConfig{Kafka: kafka, SuppressionsTopic: sup, StatusTopic: status, Once: once, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		select {
		case <-g.Ready():
		case <-ctx.Done():
			t.Fatalf("once=%v: not ready: a read-committed reader must reach the end past a commit marker", once)
		}
		if once {
			if err := <-done; err != nil {
				t.Fatalf("once: Run: %v", err)
			}
		}
		for user, want := range map[string]bool{"u-sup": true, "u-lifted": false, "u-del": false, "u-only-sup": false} {
			if got := g.Suppressed(user); got != want {
				t.Errorf("once=%v: Suppressed(%s) = %v, want %v", once, user, got, want)
			}
		}
		if _, at := g.Check([]byte("u-del")); !at.Equal(t1.Add(time.Hour)) {
			t.Errorf("once=%v: u-del deleted at %v, want the latest processedAt %v", once, at, t1.Add(time.Hour))
		}
		if _, at := g.Check([]byte("u-only-sup")); !at.IsZero() {
			t.Errorf("once=%v: a SUPPRESS_ONLY status is not a deletion, got %v", once, at)
		}
		cancel()
		if !once {
			<-done
		}
	}
}

// Forgets: a delete notice never; a deleted user's record accepted (receivedAt, else
// first-attempt-at, else the Kafka timestamp) before the deletion; a suppressed user's always.
func TestRegulationsForgets(t *testing.T) {
	kafka, _, _ := servicetest.Connect(t, kafkatest.Embedded(t))
	g, err := platform.NewRegulations(platform.RegulationsConfig{Kafka: kafka, SuppressionsTopic: "s"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)
	g.ApplyDeletion("u-del", at)
	g.ApplySuppression("u-sup", true)
	rec := func(key, received, first string, ts time.Time) *kgo.Record {
		v := `{"type":"track"}`
		if received != "" {
			v = `{"type":"track","receivedAt":"` + received + `"}`
		}
		r := &kgo.Record{Key: []byte(key), Value: []byte(v), Timestamp: ts}
		if first != "" {
			r.Headers = []kgo.RecordHeader{{Key: schemas.HeaderFirstAttemptAt, Value: []byte(first)}}
		}
		return r
	}
	before, after := "2026-03-04T04:59:59.000Z", "2026-03-04T05:00:01.000Z"
	for _, tt := range []struct {
		name   string
		r      *kgo.Record
		exempt bool
		want   string
	}{
		{"received before", rec("d1:u-del", before, after, at.Add(time.Hour)), false, platform.ForgetDeleted},
		{"received after", rec("d1:u-del", after, before, at.Add(-time.Hour)), false, ""},
		{"first attempt before", rec("d1:u-del", "", before, at.Add(time.Hour)), false, platform.ForgetDeleted},
		{"timestamp before", rec("d1:u-del", "", "", at.Add(-time.Second)), false, platform.ForgetDeleted},
		{"timestamp after", rec("d1:u-del", "", "", at.Add(time.Second)), false, ""},
		{"a notice", rec("d1:u-del", before, before, at), true, ""},
		{"suppressed", rec("d1:u-sup", after, after, at), false, platform.ForgetSuppressed},
		{"another destination's key form", rec("d2:u-sup", after, after, at), false, ""},
		{"another user", rec("d1:u-other", before, before, at), false, ""},
	} {
		if got := g.Forgets(tt.r, "d1", tt.exempt); got != tt.want {
			t.Errorf("%s: Forgets = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// The check on the deliverer's hot path allocates nothing for a user with no regulation, nor
// for a suppressed one (docs/delivery.md#deleted-and-suppressed-users).
func TestRegulationsForgetsAllocatesNothing(t *testing.T) {
	kafka, _, _ := servicetest.Connect(t, kafkatest.Embedded(t))
	g, err := platform.NewRegulations(platform.RegulationsConfig{Kafka: kafka, SuppressionsTopic: "s"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		g.ApplySuppression("u-"+strconv.Itoa(i), true)
		g.ApplyDeletion("d-"+strconv.Itoa(i), time.Now())
	}
	for _, key := range []string{"order-hooks:someone", "order-hooks:u-7"} {
		r := &kgo.Record{Key: []byte(key), Value: []byte(`{"type":"track","receivedAt":"2026-03-04T05:06:07.000Z"}`)}
		if n := testing.AllocsPerRun(1000, func() { g.Forgets(r, "order-hooks", false) }); n != 0 {
			t.Errorf("Forgets(%s) allocates %v times per call, want 0", key, n)
		}
	}
}
