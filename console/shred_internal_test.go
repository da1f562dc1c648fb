package console

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/platform/shred"
)

// The events reader opens a batch's sealed records into buffers it reuses: each opened
// record keeps its plaintext until the batch ends, plain and shredded records are as before,
// and once the buffers have grown, a batch opens without allocating.
func TestOpenerReusesItsBuffers(t *testing.T) {
	env := servicetest.New(t, servicetest.Options{})
	keys := env.Keyring()
	s := &Service{dataKeys: keys, logger: zerolog.Nop()}
	var recs []*kgo.Record
	var plains [][]byte
	for i := range 8 {
		p := fmt.Appendf(nil, `{"userId":"u%d","properties":{"card":"4242-%d"}}`, i%3, i)
		plains = append(plains, p)
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "u%d", i%3), Value: append([]byte(nil), p...)})
	}
	env.Seal(keys, recs...)
	gone := &kgo.Record{Key: []byte("gone"), Value: []byte(`{"userId":"gone"}`)}
	env.Seal(keys, gone)
	if _, err := keys.Shred(env.Ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	plain := &kgo.Record{Value: []byte(`{"plain":true}`)}

	var o opener
	batch := func() []*kgo.Record {
		var out []*kgo.Record
		for _, r := range recs {
			out = append(out, o.open(s, r))
		}
		return out
	}
	sealedBefore := append([]byte(nil), recs[0].Value...)
	opened := batch()
	for i, r := range opened {
		if r == nil || !bytes.Equal(r.Value, plains[i]) || r == recs[i] || shred.KeyOf(r) == nil {
			t.Fatalf("record %d opened as %v", i, r)
		}
	}
	if !bytes.Equal(recs[0].Value, sealedBefore) {
		t.Fatal("opening changed the sealed record")
	}
	if o.open(s, plain) != plain {
		t.Fatal("a plain record is not returned as it is")
	}
	if o.open(s, gone) != nil {
		t.Fatal("a shredded record opened")
	}
	o.reset()
	if underRace {
		return
	}
	if allocs := testing.AllocsPerRun(20, func() { batch(); o.reset() }); allocs > 1 {
		t.Fatalf("a batch of %d sealed records allocates %.0f times once the buffers grew", len(recs), allocs)
	}
}

// A large batch (the view's backfill) grows the buffer by doubling: what it holds stays
// within a small multiple of the batch's values, however many records it opens.
func TestOpenerGrowsByDoubling(t *testing.T) {
	env := servicetest.New(t, servicetest.Options{})
	keys := env.Keyring()
	s := &Service{dataKeys: keys, logger: zerolog.Nop()}
	value := bytes.Repeat([]byte("x"), 1000)
	r := &kgo.Record{Key: []byte("u1"), Value: append([]byte(nil), value...)}
	env.Seal(keys, r)
	var o opener
	const n = 2000
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range n {
		if o.open(s, r) == nil {
			t.Fatal("did not open")
		}
	}
	runtime.ReadMemStats(&m1)
	// Growing to the exact size at each record copies the batch again each time: about
	// n²/2 × 1,000 bytes (2 GB) instead of a few times n × 1,000 (2 MB).
	if allocated := m1.TotalAlloc - m0.TotalAlloc; allocated > 16*n*uint64(len(value)) {
		t.Fatalf("opening %d records of %d bytes allocated %d MB", n, len(value), allocated>>20)
	}
}
