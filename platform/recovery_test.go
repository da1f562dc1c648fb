package platform

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A Recovery logs one info line per outage, when the consumer's first poll with records (or the
// producer's first acknowledgement) comes after it: after how long, and where it resumed.
func TestRecoveryLogsOncePerOutage(t *testing.T) {
	var logs strings.Builder
	now := time.Unix(1000, 0)
	r := NewRecovery(zerolog.New(&logs), "router events")
	r.now = func() time.Time { return now }
	fs := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "tracking.events", Partitions: []kgo.FetchPartition{
		{Partition: 2, Records: []*kgo.Record{{Topic: "tracking.events", Partition: 2, Offset: 41}, {Offset: 42}}},
		{Partition: 0, Records: []*kgo.Record{{Topic: "tracking.events", Partition: 0, Offset: 7}}},
	}}}}}

	if r.Resumed(fs) {
		t.Fatal("Resumed logged without an outage")
	}
	r.Failed(nil)
	r.Failed(errors.Join(errors.New("wrapped"), context.Canceled))
	if r.Resumed(fs) {
		t.Fatal("Resumed logged after a nil error and a cancellation, which are no outage")
	}
	r.Failed(errors.New("dial tcp: connection refused"))
	now = now.Add(25 * time.Second)
	r.Failed(errors.New("dial tcp: connection refused"))
	if !r.Resumed(fs) {
		t.Fatal("Resumed did not log after an outage")
	}
	if r.Resumed(fs) {
		t.Fatal("Resumed logged twice for one outage")
	}
	line := logs.String()
	for _, want := range []string{`"level":"info"`, `"after":"25s"`, `"failures":2`, `"offsets":"tracking.events/0@7 tracking.events/2@41"`,
		`"last_error":"dial tcp: connection refused"`, `router events: resumed after a Kafka outage`} {
		if !strings.Contains(line, want) {
			t.Errorf("the log lacks %s:\n%s", want, line)
		}
	}
	if n := strings.Count(line, "\n"); n != 1 {
		t.Errorf("%d lines logged, want 1:\n%s", n, line)
	}

	// A producer: the first acknowledgement after a failed record.
	logs.Reset()
	p := NewRecovery(zerolog.New(&logs), "ingest producer")
	p.now = func() time.Time { return now }
	hook := p.ProducerHook().(kgo.HookProduceRecordUnbuffered)
	hook.OnProduceRecordUnbuffered(&kgo.Record{Topic: "tracking.events", Partition: 1, Offset: 3}, nil)
	hook.OnProduceRecordUnbuffered(&kgo.Record{Topic: "tracking.events"}, kgo.ErrRecordTimeout)
	now = now.Add(time.Second)
	hook.OnProduceRecordUnbuffered(&kgo.Record{Topic: "tracking.events", Partition: 1, Offset: 4}, nil)
	hook.OnProduceRecordUnbuffered(&kgo.Record{Topic: "tracking.events", Partition: 1, Offset: 5}, nil)
	if got := logs.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, `"offsets":"tracking.events/1@4"`) ||
		!strings.Contains(got, "ingest producer: resumed producing after a Kafka outage") || !strings.Contains(got, `"after":"1s"`) {
		t.Errorf("the producer's log, want one resume line at tracking.events/1@4 after 1s:\n%s", got)
	}
}
