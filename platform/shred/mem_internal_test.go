package shred

import (
	"crypto/rand"
	"encoding/hex"
	"runtime"
	"strconv"
	"testing"
)

// TestMemoryPerKey measures the heap a keyring holds per live key: the AES-GCM state, the id,
// the index entries (docs/security.md#crypto-shredding, "Memory and growth").
func TestMemoryPerKey(t *testing.T) {
	const n = 5000
	k := &Keyring{keys: map[keyID]*dataKey{}, bySubject: map[subjectHash][]keyID{}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		var id keyID
		raw := make([]byte, 32)
		_, _ = rand.Read(id[:])
		_, _ = rand.Read(raw)
		dk, err := newDataKey([]byte(hex.EncodeToString(id[:])), hashSubject("user-"+strconv.Itoa(i)), raw)
		if err != nil {
			t.Fatal(err)
		}
		k.add(id, dk)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%d keys: %.0f bytes of heap per key", len(k.keys), per)
	if per > 2048 {
		t.Errorf("%.0f bytes per key, want at most 2 KB", per)
	}
	runtime.KeepAlive(k)
}
