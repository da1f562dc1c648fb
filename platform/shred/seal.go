package shred

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// Sealed values (docs/topics.md#sealed-values): version ‖ nonce ‖ AES-256-GCM ciphertext and
// tag, the key id (as the header carries it, 32 hex digits) the additional data.
const (
	sealedVersion = 1
	nonceSize     = 12
	tagSize       = 16
	// Overhead is how many bytes sealing adds to a value.
	Overhead = 1 + nonceSize + tagSize
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

// Open returns r's value in clear: as it is for a plain record (no tributary-key header),
// decrypted for a sealed one into a new buffer of the plaintext's size (its only allocation).
// A key it has not read yet is waited for (see the package comment); ErrShredded when the key
// is gone, ErrDamaged when the value does not decrypt, an error wrapping ErrUnavailable when
// the keys topic could not be read in time. It never changes r.
func (k *Keyring) Open(r *kgo.Record) ([]byte, error) {
	hexID := KeyOf(r)
	if hexID == nil {
		return r.Value, nil
	}
	dk, err := k.key(hexID)
	if err != nil {
		return nil, err
	}
	return dk.open(r.Value)
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
	return dk.open(value)
}

func (dk *dataKey) open(value []byte) ([]byte, error) {
	if len(value) < Overhead || value[0] != sealedVersion {
		return nil, ErrDamaged
	}
	ct := value[1+nonceSize:]
	plain, err := dk.aead.Open(make([]byte, 0, len(ct)-tagSize), value[1:1+nonceSize], ct, dk.hexID)
	if err != nil {
		return nil, ErrDamaged
	}
	return plain, nil
}

func (dk *dataKey) seal(plain []byte) ([]byte, error) {
	out := make([]byte, 1+nonceSize, len(plain)+Overhead)
	out[0] = sealedVersion
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, err
	}
	return dk.aead.Seal(out, out[1:1+nonceSize], plain, dk.hexID), nil
}

// Seal seals plain with subject's newest live key, creating (and writing) one first if it has
// none (Prepare); it returns the sealed value and the key id for the tributary-key header. It
// seals even when Sealing is false: callers check Sealing.
func (k *Keyring) Seal(ctx context.Context, subject string, plain []byte) (sealed []byte, hexID []byte, err error) {
	if subject == "" {
		return nil, nil, errors.New("sealing: no subject")
	}
	h := hashSubject(subject)
	for range 3 { // a key shredded between Prepare and the lookup is made again
		k.mu.RLock()
		dk := k.newest(h)
		k.mu.RUnlock()
		if dk != nil {
			sealed, err := dk.seal(plain)
			return sealed, dk.hexID, err
		}
		if err := k.Prepare(ctx, subject); err != nil {
			return nil, nil, err
		}
	}
	return nil, nil, fmt.Errorf("sealing: the subject's keys were shredded while sealing")
}

// SealWith seals plain with the key hexID names (the key of the record it derives from: the
// router seals a delivery with its event's key, so a user keeps one key). ErrShredded when the
// key is gone.
func (k *Keyring) SealWith(hexID, plain []byte) ([]byte, error) {
	dk, err := k.key(hexID)
	if err != nil {
		return nil, err
	}
	return dk.seal(plain)
}

// SealRecords seals, in place, the value of every record whose subject(r) is not empty (a
// tributary-key header added), when Sealing — never a tombstone (nil value) nor a record
// sealed already; the keys it needs are created first, with one
// acknowledged write for all (Prepare). Records without a subject, and every record when
// Sealing is false, stay plain. On an error the records are left as they were.
func (k *Keyring) SealRecords(ctx context.Context, recs []*kgo.Record, subject func(*kgo.Record) string) error {
	if !k.seal || len(recs) == 0 {
		return nil
	}
	subjects := make([]string, len(recs))
	for i, r := range recs {
		if r.Value != nil && KeyOf(r) == nil {
			subjects[i] = subject(r)
		}
	}
	if err := k.Prepare(ctx, subjects...); err != nil {
		return err
	}
	values := make([][]byte, len(recs))
	ids := make([][]byte, len(recs))
	for i, r := range recs {
		if subjects[i] == "" {
			continue
		}
		v, id, err := k.Seal(ctx, subjects[i], r.Value)
		if err != nil {
			return err
		}
		values[i], ids[i] = v, id
	}
	for i, r := range recs {
		if ids[i] != nil {
			r.Value = values[i]
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: schemas.HeaderDataKey, Value: ids[i]})
		}
	}
	return nil
}

// RecordKey is the subject of a record keyed by its user (tracking.events, tracking.rejected,
// audiences.state): its record key.
func RecordKey(r *kgo.Record) string { return string(r.Key) }
