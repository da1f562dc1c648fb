package router

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/platform"
)

func testDedupe(window time.Duration, maxEntries int) (*dedupe, *time.Time) {
	now := time.UnixMilli(1_000_000)
	d := newDedupe(Config{DedupeWindow: window, DedupeMaxEntries: maxEntries, DedupeTopic: "router.dedupe"}, platform.KafkaSettings{}, nil, zerolog.Nop())
	d.now = func() time.Time { return now }
	d.parts[0] = &dedupePart{seen: map[digest]int64{}}
	d.parts[1] = &dedupePart{seen: map[digest]int64{}}
	return d, &now
}

// TestDedupeForgetsAnAbortedBatch: the pairs of a batch that was not handed on (an aborted
// transaction, a produce that failed) are read again, so they must not count as routed.
func TestDedupeForgetsAnAbortedBatch(t *testing.T) {
	d, now := testDedupe(time.Minute, 100)
	ms := now.UnixMilli()
	if d.seenBefore(0, []byte("web"), []byte("m1"), ms) {
		t.Fatal("m1 seen before anything was routed")
	}
	if !d.seenBefore(0, []byte("web"), []byte("m1"), ms) {
		t.Fatal("m1 twice in one batch: not a duplicate")
	}
	if recs := d.records(*now); len(recs) != 1 || recs[0].Partition != 0 || len(recs[0].Value) != digestSize {
		t.Fatalf("records of the batch: %v", recs)
	}
	d.ended(false, *now)
	if d.seenBefore(0, []byte("web"), []byte("m1"), ms) {
		t.Fatal("m1 of an aborted batch counts as routed")
	}
	d.ended(true, *now)
	if !d.seenBefore(0, []byte("web"), []byte("m1"), ms) {
		t.Fatal("m1 of a handed-on batch not remembered")
	}
	if d.seenBefore(1, []byte("web"), []byte("m1"), ms) || d.seenBefore(0, []byte("app"), []byte("m1"), ms) {
		t.Fatal("another partition or source shares the memory")
	}
}

// TestDedupeMemoryBound: past maxEntries the oldest pairs are forgotten first, across
// partitions, and the stats say how many are kept and how old the oldest is; past the window
// every pair is forgotten.
func TestDedupeMemoryBound(t *testing.T) {
	d, now := testDedupe(time.Minute, 4)
	batch := func(p int32, ids ...string) {
		for _, id := range ids {
			d.seenBefore(p, []byte("web"), []byte(id), now.UnixMilli())
		}
		d.ended(true, *now)
		*now = now.Add(time.Second)
	}
	batch(0, "a", "b")
	batch(1, "c", "d")
	batch(0, "e", "f")
	if n, age := d.stats(); n != 4 || age != 2*time.Second {
		t.Fatalf("stats: %d entries, oldest %s; want 4, 2s (a and b forgotten)", n, age)
	}
	ms := now.UnixMilli()
	if d.seenBefore(0, []byte("web"), []byte("a"), ms) {
		t.Error("a remembered past the bound")
	}
	d.ended(false, *now)
	if !d.seenBefore(1, []byte("web"), []byte("c"), ms) || !d.seenBefore(0, []byte("web"), []byte("f"), ms) {
		t.Error("c or f forgotten")
	}
	d.ended(false, *now)
	*now = now.Add(time.Minute)
	batch(1, "g")
	if n, _ := d.stats(); n != 1 {
		t.Fatalf("%d entries after the window, want 1", n)
	}
	d.reset([]int32{1})
	if n, _ := d.stats(); n != 0 {
		t.Fatalf("%d entries after a reset, want 0", n)
	}
}
