package audiences

import (
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// staticSnapshot is a config snapshot that never changes.
type staticSnapshot struct{ cfg *schemas.Config }

func (s staticSnapshot) Version() uint64 { return 1 }

func (s staticSnapshot) Identity() *schemas.IdentityRules { return s.cfg.Identity }
func (s staticSnapshot) Audiences() []*schemas.Audience {
	out := make([]*schemas.Audience, len(s.cfg.Audiences))
	for i := range s.cfg.Audiences {
		out[i] = &s.cfg.Audiences[i]
	}
	return out
}
func (s staticSnapshot) ComputedTraits() []*schemas.ComputedTrait {
	out := make([]*schemas.ComputedTrait, len(s.cfg.ComputedTraits))
	for i := range s.cfg.ComputedTraits {
		out[i] = &s.cfg.ComputedTraits[i]
	}
	return out
}

// BenchmarkSync builds BENCH_PROFILES profiles (1,000,000 by default) from three events
// each of the throughput benchmark's stream (10 audiences, 5 computed traits), then times
// the first sync of all of them (every member and value sent) and a later one (nothing
// changed: every profile evaluated and compared), and reports the heap bytes per profile and
// the process's resident memory (at the end, and after returning its garbage to the system).
//
//	go test -run '^$' -bench BenchmarkSync -benchtime 1x ./audiences
func BenchmarkSync(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("BENCH_PROFILES"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	var before runtime.MemStats
	s, part, bt := buildBenchProfiles(b, n, &before)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	perProfile := float64(after.HeapAlloc-before.HeapAlloc) / float64(part.held())
	if f := os.Getenv("BENCH_HEAPPROFILE"); f != "" {
		w, err := os.Create(f)
		if err != nil {
			b.Fatal(err)
		}
		_ = pprof.WriteHeapProfile(w)
		w.Close()
	}

	b.ResetTimer()
	var first, steady time.Duration
	var sent int
	var perSynced float64
	for range b.N {
		for _, prof := range part.profiles {
			prof.Synced = nil
		}
		// The first sync, in transactions of MaxChangesPerTransaction identify calls (each
		// one's records dropped here, as once they are produced).
		start := time.Now()
		s.mu.Lock() // as the transform holds it (the sync releases it now and then)
		for {
			bt.out = s.syncPartition(bt, 0, part)
			for _, r := range bt.out {
				if r.Topic == s.cfg.EventsTopic {
					sent++
				}
			}
			bt.out, part.dirty = nil, nil // as once produced and the changelog written
			if part.pass == nil {
				break
			}
		}
		s.mu.Unlock()
		first = time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&after)
		perSynced = float64(after.HeapAlloc-before.HeapAlloc) / float64(part.held())
		if f := os.Getenv("BENCH_HEAPPROFILE_SYNCED"); f != "" {
			w, err := os.Create(f)
			if err != nil {
				b.Fatal(err)
			}
			_ = pprof.WriteHeapProfile(w)
			w.Close()
		}
		start = time.Now()
		s.mu.Lock()
		bt.out = s.syncPartition(bt, 0, part)
		s.mu.Unlock()
		steady = time.Since(start)
		if len(bt.out) != 0 {
			b.Fatalf("a sync with nothing changed sent %d identify calls", len(bt.out))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(len(part.profiles)), "profiles")
	b.ReportMetric(perProfile, "heap-bytes/profile")
	b.ReportMetric(perSynced, "heap-bytes/synced-profile")
	b.ReportMetric(first.Seconds(), "s/first-sync")
	b.ReportMetric(float64(sent), "identifies/first-sync")
	b.ReportMetric(steady.Seconds(), "s/sync")
	b.ReportMetric(float64(residentBytes())/(1<<20), "RSS-MiB")
	debug.FreeOSMemory() // what is left: the profiles, without the garbage of building them
	b.ReportMetric(float64(residentBytes())/(1<<20), "RSS-MiB-after-GC")
	runtime.KeepAlive(part)
}

// newBenchService makes a service with the benchmark config and no Kafka, one restored
// partition (0) and a batch to process messages and syncs in. The caller's tb cleans it up.
func newBenchService(tb testing.TB, mods ...func(*Config)) (*Service, *partition, *batch) {
	tb.Helper()
	cfg, err := schemas.ParseConfig([]byte("sources: [{id: web, writeKey: wk1}, {id: engage, writeKey: wk2}]\n"+benchConfig), schemas.ConfigFormatYAML)
	if err != nil {
		tb.Fatal(err)
	}
	c := DefaultConfig()
	c.Addr, c.Token = "127.0.0.1:0", "audiences-test-token-0123456789"
	c.IdentityExternalIDs = os.Getenv("BENCH_IDENTITY") != "off" // docs/benchmarks.md
	for _, mod := range mods {
		mod(&c)
	}
	s, err := New(c, Deps{
		Deps: platform.Deps{
			Kafka:  platform.KafkaSettings{Brokers: []string{"127.0.0.1:1"}, ReplicationFactor: -1, Partitions: 1},
			Logger: zerolog.Nop(),
		},
		Config: func() Snapshot { return staticSnapshot{cfg} },
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.producer.Close(); s.lag.Close() })
	s.refreshModel()
	s.nparts = 1
	part := &partition{restored: true, profiles: map[string]*profile{}, meta: partMeta{Defs: map[string]metaDef{}}}
	return s, part, &batch{now: time.Now().UnixMilli(), touched: map[int32]*partition{}}
}

// buildBenchProfiles makes a service with the benchmark config (no Kafka) and one partition of
// n profiles built from three events each of the throughput benchmark's stream (kinds drawn at
// random), as BenchmarkSync and TestMemoryBudget measure them; before is the heap before the
// profiles. The caller's tb cleans the service up.
func buildBenchProfiles(tb testing.TB, n int, before *runtime.MemStats) (*Service, *partition, *batch) {
	tb.Helper()
	s, part, _ := newBenchService(tb)
	runtime.GC()
	runtime.ReadMemStats(before)
	part.profiles = make(map[string]*profile, n) // counted: it grows with the profiles
	r := rand.New(rand.NewPCG(3, 4))
	now := time.Now().UnixMilli()
	bt := &batch{now: now, touched: map[int32]*partition{}}
	for i := range 3 * n {
		// Each user gets three events: round-robin over users, of kinds drawn at random.
		raw := benchEvent(r, 10*i+r.IntN(10), n) // a kind at random
		u := "user-" + strconv.Itoa(i%n)
		raw = strings.Replace(raw, `"userId":"user-`, `"userId":"x`, 1) // the random user out
		raw = strings.Replace(raw, `"userId":"x`, `"userId":"`+u+`","_":"`, 1)
		m, err := schemas.DecodeMessage([]byte(raw))
		if err != nil {
			tb.Fatal(err, raw)
		}
		s.handleMessage(bt, 0, part, m, nil, "", time.UnixMilli(now))
		if i%100_000 == 0 {
			// The batch written to the changelog (which packs its profiles, packed.go), and
			// its records and hand-offs as if produced.
			s.changelog(nil, 0, part)
			bt.out = nil
		}
	}
	s.changelog(nil, 0, part)
	bt.out, bt.touched = nil, map[int32]*partition{}
	return s, part, bt
}

// residentBytes is the process's resident set size (0 where /proc is not there).
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
