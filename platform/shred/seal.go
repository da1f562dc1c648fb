package shred

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// Sealed values (docs/topics.md#sealed-values): version ‖ nonce ‖ AES-256-GCM ciphertext and
// tag, the key id (as the header carries it, 32 hex digits) the additional data.
const (
	sealedVersion = 1
	nonceSize     = 12
	tagSize       = 16
	// Headroom is how many bytes a sealed value has before its ciphertext (the version and
	// the nonce): a buffer that reserves them, and TagSize spare bytes after the plaintext,
	// is sealed in place (Key.SealReserved).
	Headroom = 1 + nonceSize
	// TagSize is how many bytes the authentication tag adds after the ciphertext.
	TagSize = tagSize
	// Overhead is how many bytes sealing adds to a value.
	Overhead = Headroom + tagSize
)

// ErrDamaged is the error of Open for a sealed value that does not decrypt with its key:
// altered, truncated, or moved from another key's record. It is not a deletion.
var ErrDamaged = errors.New("the sealed value does not open with its key: it was altered or damaged")

// KeyOf returns the value of r's tributary-key header (the id of the key its value is sealed
// with), or nil for a plain record.
func KeyOf(r *kgo.Record) []byte {
	for i := range r.Headers {
		if r.Headers[i].Key == schemas.HeaderDataKey {
			return r.Headers[i].Value
		}
	}
	return nil
}

// Key is one live data key, as Keyring.Key returns it: a consumer that opens a record and
// seals what it derives from it (the router: an event and its deliveries) looks the key up
// once. Its methods are safe for concurrent use.
type Key dataKey

// Key returns the live key a tributary-key header names. A key it has not read yet is waited
// for (see the package comment); ErrShredded when the key is gone, an error wrapping
// ErrUnavailable when the keys topic could not be read in time.
func (k *Keyring) Key(hexID []byte) (*Key, error) {
	dk, err := k.key(hexID)
	return (*Key)(dk), err
}

// ID is the key's id as the tributary-key header carries it. The caller must not change it.
func (key *Key) ID() []byte { return key.hexID }

// Live reports whether the key is still live: false once its tombstone was read (or Shred
// made it) by the keyring it came from. A load of one flag: cheap enough to ask right before
// sending what it opened.
func (key *Key) Live() bool { return !key.gone.Load() }

// Open appends the plaintext of a value sealed with the key to dst (a reused buffer spares
// the allocation); ErrDamaged when it does not decrypt. dst must not overlap value.
func (key *Key) Open(dst, value []byte) ([]byte, error) {
	return (*dataKey)(key).open(dst, value)
}

// Seal returns plain sealed with the key, in a new buffer.
func (key *Key) Seal(plain []byte) []byte { return (*dataKey)(key).seal(plain, false) }

// SealReserved seals buf[Headroom:] in place: buf's first Headroom bytes are reserved for
// the version and the nonce, and the tag is appended (without a copy when cap(buf) leaves
// TagSize bytes after it). The plaintext is overwritten.
func (key *Key) SealReserved(buf []byte) []byte {
	return (*dataKey)(key).sealAt(buf[:Headroom], buf[Headroom:])
}

// Open returns r's value in clear: as it is for a plain record (no tributary-key header),
// decrypted for a sealed one into a new buffer of the plaintext's size (its only allocation).
// A key it has not read yet is waited for (see the package comment); ErrShredded when the key
// is gone, ErrDamaged when the value does not decrypt, an error wrapping ErrUnavailable when
// the keys topic could not be read in time. It never changes r.
func (k *Keyring) Open(r *kgo.Record) ([]byte, error) {
	return k.OpenValue(KeyOf(r), r.Value)
}

// OpenValue is Open for a value and the id of its key (hexID nil: plain).
func (k *Keyring) OpenValue(hexID, value []byte) ([]byte, error) {
	if hexID == nil {
		return value, nil
	}
	dk, err := k.key(hexID)
	if err != nil {
		return nil, err
	}
	return dk.open(nil, value)
}

func (dk *dataKey) open(dst, value []byte) ([]byte, error) {
	if len(value) < Overhead || value[0] != sealedVersion {
		return nil, ErrDamaged
	}
	ct := value[Headroom:]
	if dst == nil {
		dst = make([]byte, 0, len(ct)-tagSize)
	}
	plain, err := dk.aead.Open(dst, value[1:Headroom], ct, dk.hexID)
	if err != nil {
		return nil, ErrDamaged
	}
	return plain, nil
}

// seal seals plain: in its own buffer when reuse is true and its spare capacity holds
// Overhead more bytes (the plaintext is moved up by Headroom and overwritten), else into a
// new buffer.
func (dk *dataKey) seal(plain []byte, reuse bool) []byte {
	n := len(plain)
	if reuse && cap(plain)-n >= Overhead {
		buf := plain[:Headroom+n]
		copy(buf[Headroom:], buf[:n])
		return dk.sealAt(buf[:Headroom], buf[Headroom:])
	}
	return dk.sealAt(make([]byte, Headroom, n+Overhead), plain)
}

// sealAt writes the version and a fresh nonce (nextNonce) into head (Headroom bytes) and
// appends the ciphertext of plain and its tag to it: in place when plain starts right after
// head in the same buffer (GCM allows the exact overlap).
func (dk *dataKey) sealAt(head, plain []byte) []byte {
	head[0] = sealedVersion
	nextNonce(head[1:Headroom])
	return dk.aead.Seal(head, head[1:Headroom], plain, dk.hexID)
}

// The process's nonces: a random 96-bit start, then a counter in its low 64 bits. AES-GCM
// needs a nonce used once per key; keys are shared by every process that seals for a user
// (ingest, the router, the deliverer, audiences), so a nonce must be unique across processes:
// two processes' sequences meet only if their random 32-bit prefixes are equal and their random
// 64-bit counters come within the number of values sealed of each other, which is less likely
// than two random 96-bit nonces colliding. A counter costs an atomic add where a random nonce
// cost a read of the kernel's generator (about 90 ns, 30 % of sealing a 300-byte record).
var (
	noncePrefix  uint32
	nonceCounter atomic.Uint64
)

func init() {
	var seed [12]byte
	rand.Read(seed[:]) // never fails (crypto/rand)
	noncePrefix = binary.BigEndian.Uint32(seed[:4])
	nonceCounter.Store(binary.BigEndian.Uint64(seed[4:]))
}

// nextNonce writes the process's next nonce into dst (nonceSize bytes).
func nextNonce(dst []byte) {
	binary.BigEndian.PutUint32(dst[:4], noncePrefix)
	binary.BigEndian.PutUint64(dst[4:nonceSize], nonceCounter.Add(1))
}

// Seal seals plain with subject's newest live key, creating (and writing) one first if it has
// none (Prepare); it returns the sealed value and the key id for the tributary-key header. It
// seals even when Sealing is false: callers check Sealing.
func (k *Keyring) Seal(ctx context.Context, subject string, plain []byte) (sealed []byte, hexID []byte, err error) {
	if subject == "" {
		return nil, nil, errors.New("sealing: no subject")
	}
	keys := []*dataKey{unset}
	if err := k.newestKeys(ctx, []subjectHash{hashSubject(subject)}, keys); err != nil {
		return nil, nil, err
	}
	return keys[0].seal(plain, false), keys[0].hexID, nil
}

// SealWith seals plain with the key hexID names (the key of the record it derives from: the
// router seals a delivery with its event's key, so a user keeps one key). ErrShredded when the
// key is gone.
func (k *Keyring) SealWith(hexID, plain []byte) ([]byte, error) {
	dk, err := k.key(hexID)
	if err != nil {
		return nil, err
	}
	return dk.seal(plain, false), nil
}

// SealRecords seals the value of every record whose subject(r) is not empty (a tributary-key
// header added), when Sealing — never a tombstone (nil value) nor a record sealed already;
// the keys it needs are created first, with one acknowledged write for all (Prepare). Records
// without a subject, and every record when Sealing is false, stay plain. On an error the
// records are left as they were. Each sealed value is a new buffer: the plaintext is kept.
func (k *Keyring) SealRecords(ctx context.Context, recs []*kgo.Record, subject func(*kgo.Record) []byte) error {
	return k.sealRecords(ctx, recs, subject, false)
}

// SealRecordsInPlace is SealRecords for records whose plaintext the caller gives up: a value
// whose spare capacity holds Overhead more bytes is sealed in its own buffer (no allocation),
// the others into new ones.
func (k *Keyring) SealRecordsInPlace(ctx context.Context, recs []*kgo.Record, subject func(*kgo.Record) []byte) error {
	return k.sealRecords(ctx, recs, subject, true)
}

func (k *Keyring) sealRecords(ctx context.Context, recs []*kgo.Record, subject func(*kgo.Record) []byte, reuse bool) error {
	if !k.seal || len(recs) == 0 {
		return nil
	}
	// One hash per subject and one look-up pass under the read lock for the whole batch;
	// nothing changes before every key is known, so an error leaves the records as they were.
	hashes := make([]subjectHash, len(recs))
	keys := make([]*dataKey, len(recs))
	for i, r := range recs {
		if r.Value == nil || KeyOf(r) != nil {
			continue
		}
		if s := subject(r); len(s) > 0 {
			hashes[i] = sha256.Sum256(s)
			keys[i] = unset
		}
	}
	if err := k.newestKeys(ctx, hashes, keys); err != nil {
		return err
	}
	for i, r := range recs {
		if dk := keys[i]; dk != nil {
			r.Value = dk.seal(r.Value, reuse)
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: schemas.HeaderDataKey, Value: dk.hexID})
		}
	}
	return nil
}

// unset marks, in newestKeys' keys, a subject whose key is to be looked up.
var unset = new(dataKey)

// newestKeys sets keys[i] to the newest live key of hashes[i], for every i where keys[i] is
// unset, creating the missing keys first (Prepare); the other entries stay as they are.
func (k *Keyring) newestKeys(ctx context.Context, hashes []subjectHash, keys []*dataKey) error {
	for range 3 { // a key shredded between its creation and the look-up is made again
		var missing []subjectHash
		k.mu.RLock()
		for i, dk := range keys {
			if dk != unset {
				continue
			}
			if dk = k.newest(hashes[i]); dk != nil {
				keys[i] = dk
			} else {
				missing = append(missing, hashes[i])
			}
		}
		k.mu.RUnlock()
		if len(missing) == 0 {
			return nil
		}
		if err := k.prepare(ctx, missing); err != nil {
			return err
		}
	}
	return fmt.Errorf("sealing: the subject's keys were shredded while sealing")
}

// RecordKey is the subject of a record keyed by its user (tracking.events, tracking.rejected,
// audiences.state): its record key.
func RecordKey(r *kgo.Record) []byte { return r.Key }
