package audiences

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDecodeAhead: a poll large enough to be decoded ahead on a goroutine of its own
// (decodeAhead) changes the profiles as the same records do in polls too small for it,
// decoded in order: a record that does not decode is skipped, the service's own identify
// calls are skipped, and every message counts once. Run under -race.
func TestDecodeAhead(t *testing.T) {
	now := time.Now()
	r := rand.New(rand.NewPCG(3, 4))
	var recs []*kgo.Record
	for i := range 5*aheadChunk + 17 {
		v := []byte(benchEvent(r, i, 300))
		switch i {
		case 100, 2*aheadChunk + 1:
			v = []byte(`{"type":"track","userId":`) // does not decode
		}
		rec := &kgo.Record{Topic: "tracking.events", Partition: 0, Offset: int64(i), Value: v, Timestamp: now}
		if i%97 == 5 {
			rec.Headers = []kgo.RecordHeader{{Key: HeaderOrigin, Value: []byte(OriginAudiences)}}
		}
		recs = append(recs, rec)
	}
	run := func(poll int) map[string]string {
		t.Helper()
		s, part, _ := newBenchService(t)
		s.cfg.EventsTopic = "tracking.events"
		s.now = func() time.Time { return now }
		s.parts = map[int32]*partition{0: part}
		state := map[string]string{}
		for i := 0; i < len(recs); i += poll {
			fs := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "tracking.events", Partitions: []kgo.FetchPartition{{Partition: 0, Records: recs[i:min(i+poll, len(recs))]}}}}}}
			out, err := s.transform(context.Background(), fs)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range out {
				state[fmt.Sprint(o.Topic, "/", o.Partition, "/", string(o.Key))] = string(o.Value)
			}
		}
		if part.next != int64(len(recs)) {
			t.Errorf("poll %d: next offset %d, want %d", poll, part.next, len(recs))
		}
		return state
	}
	inOrder, ahead := run(aheadChunk), run(len(recs))
	if len(inOrder) < 200 || len(inOrder) != len(ahead) {
		t.Fatalf("%d records in order, %d decoded ahead", len(inOrder), len(ahead))
	}
	for k, v := range inOrder {
		if ahead[k] != v {
			t.Fatalf("%s: decoded ahead %s, in order %s", k, ahead[k], v)
		}
	}
}

// TestChangelogBuffersRecycled: the buffers of a transaction's changelog records are reused
// only once it committed (Service.ended(true)); until then the records of a transaction
// still in the client are left as they were, whatever later transforms write.
func TestChangelogBuffersRecycled(t *testing.T) {
	now := time.Now()
	s, part, _ := newBenchService(t)
	s.cfg.EventsTopic = "tracking.events"
	s.now = func() time.Time { return now }
	s.parts = map[int32]*partition{0: part, 1: {restored: true, profiles: map[string]*profile{}, meta: partMeta{Defs: map[string]metaDef{}}}}
	r := rand.New(rand.NewPCG(5, 6))
	poll := func(from int) []*kgo.Record {
		t.Helper()
		var ps []kgo.FetchPartition
		for p := range int32(2) {
			var recs []*kgo.Record
			for i := range 600 {
				recs = append(recs, &kgo.Record{Topic: "tracking.events", Partition: p, Offset: int64(from + i), Value: []byte(benchEvent(r, from+i, 400)), Timestamp: now})
			}
			ps = append(ps, kgo.FetchPartition{Partition: p, Records: recs})
		}
		out, err := s.transform(context.Background(), kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "tracking.events", Partitions: ps}}}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	snapshot := func(out []*kgo.Record) []string {
		var vs []string
		for _, o := range out {
			vs = append(vs, string(o.Value))
		}
		return vs
	}
	out1 := poll(0)
	want1 := snapshot(out1)
	if len(s.held.chunks) == 0 || len(s.held.recs) == 0 {
		t.Fatal("no buffers held for the transaction")
	}
	poll(600) // another transaction before the first is known to have committed
	if got := snapshot(out1); !slices.Equal(got, want1) {
		t.Fatal("the records of a transaction not known to be committed were changed")
	}
	s.ended(true)
	if len(s.held.chunks)+len(s.held.recs) != 0 {
		t.Fatal("buffers still held after the commit")
	}
	for _, o := range poll(1200) {
		if o.Topic == s.cfg.StateTopic && o.Value != nil && !json.Valid(o.Value) {
			t.Fatalf("a record written in recycled buffers: %s", o.Value)
		}
	}
}
