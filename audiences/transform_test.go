package audiences

import (
	"context"
	"fmt"
	"math/rand/v2"
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
