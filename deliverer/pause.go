package deliverer

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// Pausing retry-tier partitions until their head record is due (docs/delivery.md#retry-tiers).

// pauseUntil pauses partition k until due, rewinding it to r so r is fetched again then. It
// never sleeps in the poll loop: a timer resumes the partition.
func (s *Service) pauseUntil(k partKey, r *kgo.Record, due time.Time) {
	s.cl.PauseFetchPartitions(map[string][]int32{k.topic: {k.part}})
	s.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{k.topic: {k.part: {Epoch: r.LeaderEpoch, Offset: r.Offset}}})
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.timers[k]; t != nil {
		t.Stop()
	}
	s.timers[k] = time.AfterFunc(time.Until(due), func() {
		s.mu.Lock()
		delete(s.timers, k)
		s.mu.Unlock()
		s.cl.ResumeFetchPartitions(map[string][]int32{k.topic: {k.part}})
	})
}

func (s *Service) stopTimers() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, t := range s.timers {
		t.Stop()
		delete(s.timers, k)
	}
}

func headerTime(r *kgo.Record, key string) time.Time {
	for _, h := range r.Headers {
		if h.Key == key {
			t, _ := schemas.ParseTimestamp(string(h.Value))
			return t
		}
	}
	return time.Time{}
}
