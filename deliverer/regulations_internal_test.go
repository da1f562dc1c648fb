package deliverer

import (
	"context"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// regulationReport is the deliverer's report on tracking.deletions.status, keyed
// <requestId>/deliverer, in the form the console reads (schemas.DecodeDeletionStatusRecord).
func TestReportRegulation(t *testing.T) {
	env := servicetest.New(t, servicetest.Options{})
	s, err := New(DefaultConfig(), Deps{
		Deps: platform.Deps{
			Kafka:     env.Kafka,
			KafkaOpts: env.KafkaOpts,
			Logger:    env.Logger,
		},
		Config: func() Destinations { return env.Store.Snapshot() },
		Now:    func() time.Time { return time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.cl.ProduceSync(ctx, s.regulationReport("r1", "u1", schemas.KindSuppressWithDelete, 3)).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := env.Reader(schemas.TopicDeletionsStatus).WaitFor(1, 10*time.Second)
	if len(got) != 1 || string(got[0].Key) != "r1/deliverer" {
		t.Fatalf("status records %v, want one keyed r1/deliverer", got)
	}
	rep, _, err := schemas.DecodeDeletionStatusRecord(got[0].Value)
	if err != nil || rep.Store != schemas.StoreDeliverer || rep.RequestID != "r1" || rep.UserID != "u1" || rep.Kind != schemas.KindSuppressWithDelete ||
		rep.Counts[schemas.CountDropped] != 3 || rep.DoneAt != "2026-11-27T08:00:00.000Z" {
		t.Fatalf("report %s: %+v %v", got[0].Value, rep, err)
	}
}
