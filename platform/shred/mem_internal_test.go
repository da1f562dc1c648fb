package shred

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"runtime"
	"strconv"
	"sync"
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

// TestNoncesNeverRepeat: the process's nonces (nextNonce) are distinct across many seals from
// concurrent goroutines, keep the process's random prefix, and each sealed value carries its own.
func TestNoncesNeverRepeat(t *testing.T) {
	const workers, each = 4, 5000
	got := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var n [nonceSize]byte
			for range each {
				nextNonce(n[:])
				got[w] = append(got[w], string(n[:]))
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, g := range got {
		for _, n := range g {
			if seen[n] {
				t.Fatalf("nonce %x used twice", n)
			}
			seen[n] = true
			if binary.BigEndian.Uint32([]byte(n[:4])) != noncePrefix {
				t.Fatalf("nonce %x without the process's prefix %08x", n, noncePrefix)
			}
		}
	}
	dk := &dataKey{hexID: []byte("00112233445566778899aabbccddeeff")}
	block, _ := aes.NewCipher(make([]byte, 32))
	dk.aead, _ = cipher.NewGCM(block)
	a, b := dk.seal([]byte("same"), false), dk.seal([]byte("same"), false)
	if bytes.Equal(a[1:Headroom], b[1:Headroom]) || bytes.Equal(a, b) {
		t.Fatalf("two seals of one value share a nonce: %x %x", a, b)
	}
}
