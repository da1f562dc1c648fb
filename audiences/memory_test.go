package audiences

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"testing"
	"unsafe"
)

// Memory per profile (docs/audiences.md#memory, docs/benchmarks.md#audiences).
const (
	// heapBudgetPerProfile is the most heap a synced profile of the benchmark's shape may
	// take (BenchmarkSync: 10 audiences, 5 computed traits, 3 events per profile).
	heapBudgetPerProfile = 500
	// rssBudget is the most resident memory the process may take with 1,000,000 such
	// profiles after their first sync.
	rssBudget = 1 << 30
)

// syncAllProfiles runs a complete first sync of the partition (every transaction of it), with
// the records dropped as once produced, and returns the identify calls it built.
func syncAllProfiles(s *Service, part *partition, bt *batch) (sent int) {
	s.mu.Lock() // as the transform holds it (the sync releases it now and then)
	defer s.mu.Unlock()
	for {
		bt.out = s.syncPartition(bt, 0, part)
		for _, r := range bt.out {
			if r.Topic == s.cfg.EventsTopic {
				sent++
			}
		}
		bt.out, part.dirty = nil, nil
		if part.pass == nil {
			return sent
		}
	}
}

// TestMemoryBudget builds BENCH_PROFILES profiles (200,000 by default) of BenchmarkSync's
// shape, syncs them, and fails when a synced profile takes more heap than
// heapBudgetPerProfile. It runs only when asked (it takes a few seconds and measures the
// whole process's heap):
//
//	AUDIENCES_MEMORY_BUDGET=1 go test -count=1 -run TestMemoryBudget -v ./audiences
func TestMemoryBudget(t *testing.T) {
	if os.Getenv("AUDIENCES_MEMORY_BUDGET") == "" {
		t.Skip("set AUDIENCES_MEMORY_BUDGET=1 to check the heap per profile against its budget")
	}
	n := 200_000
	if v := os.Getenv("BENCH_PROFILES"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	perProfile, perSynced, _ := measureProfiles(t, n)
	t.Logf("%d profiles: %.0f heap bytes per profile, %.0f per synced profile (budget %d)", n, perProfile, perSynced, heapBudgetPerProfile)
	if perSynced > heapBudgetPerProfile {
		t.Errorf("a synced profile takes %.0f bytes of heap, over its budget of %d (docs/audiences.md#memory)", perSynced, heapBudgetPerProfile)
	}
}

// TestMemoryRSS builds 1,000,000 profiles of BenchmarkSync's shape (BENCH_PROFILES to change
// it), syncs them, and reports the process's resident memory once the garbage of building and
// syncing them is returned to the system; it fails above rssBudget for 1,000,000 profiles.
// It runs only when asked (a few minutes on a shared 2-core machine, longer than go test's
// default timeout, and 2 GB of memory):
//
//	AUDIENCES_MEMORY_RSS=1 go test -count=1 -timeout 40m -run TestMemoryRSS -v ./audiences
func TestMemoryRSS(t *testing.T) {
	if os.Getenv("AUDIENCES_MEMORY_RSS") == "" {
		t.Skip("set AUDIENCES_MEMORY_RSS=1 to measure the resident memory of 1,000,000 synced profiles")
	}
	n := 1_000_000
	if v := os.Getenv("BENCH_PROFILES"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	_, perSynced, rss := measureProfiles(t, n)
	t.Logf("%d synced profiles: %.0f heap bytes each; resident memory %d MiB (budget %d MiB for 1,000,000)", n, perSynced, rss>>20, rssBudget>>20)
	if n == 1_000_000 && rss > rssBudget {
		t.Errorf("resident memory %d MiB with 1,000,000 synced profiles, over its budget of %d MiB (docs/audiences.md#memory)", rss>>20, rssBudget>>20)
	}
}

// measureProfiles builds n profiles and syncs them: the heap per profile before and after the
// sync, and the resident memory at the end, once free pages are returned to the system.
func measureProfiles(t *testing.T, n int) (perProfile, perSynced float64, rss int64) {
	var before, after runtime.MemStats
	s, part, bt := buildBenchProfiles(t, n, &before)
	runtime.GC()
	runtime.ReadMemStats(&after)
	perProfile = float64(after.HeapAlloc-before.HeapAlloc) / float64(part.held())
	if sent := syncAllProfiles(s, part, bt); sent == 0 {
		t.Fatal("the first sync sent nothing")
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perSynced = float64(after.HeapAlloc-before.HeapAlloc) / float64(part.held())
	debug.FreeOSMemory()
	rss = residentBytes()
	runtime.KeepAlive(part)
	return perProfile, perSynced, rss
}

// TestCompactLayout: the parts a profile holds many of keep their compact sizes
// (docs/audiences.md#memory). A field added to one of them shows here first, with the bytes
// it costs a million profiles.
func TestCompactLayout(t *testing.T) {
	for _, c := range []struct {
		what      string
		got, want uintptr
	}{
		{"a profile's fixed fields (its size class: 176 bytes)", unsafe.Sizeof(profile{}), 176},
		{"a profile's unpacked counters and aggregates (lists)", unsafe.Sizeof(lists{}), 48},
		{"a synced entry (sent)", unsafe.Sizeof(sent{}), 16},
		{"an aggregate (agg)", unsafe.Sizeof(agg{}), 24},
		{"an event counter (named)", unsafe.Sizeof(named{}), 40},
		{"a bucket of an event counter (count)", unsafe.Sizeof(count{}), 8},
		{"the state of a first/last aggregate", unsafe.Sizeof(firstLast{}), 80},
	} {
		if c.got > c.want {
			t.Errorf("%s: %d bytes, want at most %d (%d MB more per 1,000,000 profiles and entry)", c.what, c.got, c.want, (c.got-c.want)*1_000_000/1e6)
		}
	}
}
