package console

import (
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// opener opens the sealed records of one batch of a view's reader into buffers it reuses for
// the next batch (reset): the views copy what they keep, so the plaintexts need not outlive
// the batch, and a console that follows every event does not allocate one per event.
type opener struct {
	plain []byte       // the batch's opened values, back to back
	recs  []kgo.Record // the batch's opened records
}

// open returns r with its value in clear (docs/security.md#crypto-shredding): r itself when
// it is plain, a copy with the opened value when it is sealed (valid until o.reset), nil when
// it does not open — sealed with a shredded key (its user was deleted: the view never shows
// it), damaged, or its key not readable now (logged; the view goes without it).
//
// A plain record that names its user's key (header tributary-user-key: an attempt record of a
// sealed delivery without an answer) is returned as it is while that key lives, and dropped as
// a sealed one is once it was shredded.
func (o *opener) open(s *Service, r *kgo.Record) *kgo.Record {
	hexID := shred.KeyOf(r)
	if hexID == nil {
		if userKey := userKeyOf(r); userKey != nil {
			if _, ok := s.liveKey(r, userKey); !ok {
				return nil
			}
		}
		return r
	}
	key, err := s.dataKeys.Key(hexID)
	start := len(o.plain)
	if err == nil {
		// Grown here, by doubling: AES-GCM's Open would grow it to the exact size, copying the
		// whole batch's values again for every record.
		o.plain = slices.Grow(o.plain, len(r.Value))
		o.plain, err = key.Open(o.plain, r.Value)
	}
	if err != nil {
		if !errors.Is(err, shred.ErrShredded) {
			s.logger.Warn().Err(err).Str("topic", r.Topic).Int32("partition", r.Partition).Int64("offset", r.Offset).Msg("skipping a sealed record that does not open")
		}
		return nil
	}
	// A grown buffer leaves the earlier values and records where they were: they stay valid.
	o.recs = append(o.recs, *r)
	c := &o.recs[len(o.recs)-1]
	c.Value = o.plain[start:len(o.plain):len(o.plain)]
	return c
}

// sealedWith is the data key r's value is sealed with (nil for a plain record); false when it
// cannot be opened — its key shredded (its user was deleted), or not readable now (logged) —
// as open would drop it.
func (s *Service) sealedWith(r *kgo.Record) (*shred.Key, bool) {
	hexID := shred.KeyOf(r)
	if hexID == nil {
		return nil, true
	}
	return s.liveKey(r, hexID)
}

// liveKey is the data key hexID names, false when it was shredded or cannot be read now
// (logged).
func (s *Service) liveKey(r *kgo.Record, hexID []byte) (*shred.Key, bool) {
	key, err := s.dataKeys.Key(hexID)
	if err != nil {
		if !errors.Is(err, shred.ErrShredded) {
			s.logger.Warn().Err(err).Str("topic", r.Topic).Int32("partition", r.Partition).Int64("offset", r.Offset).Msg("skipping a sealed record whose key cannot be read")
		}
		return nil, false
	}
	return key, true
}

// userKeyOf is the value of r's tributary-user-key header, nil without one.
func userKeyOf(r *kgo.Record) []byte {
	for i := range r.Headers {
		if r.Headers[i].Key == schemas.HeaderUserKey {
			return r.Headers[i].Value
		}
	}
	return nil
}

// openerKeep bounds the buffer an opener keeps between batches: a backfill's first batches
// are far larger than those of the steady flow, and are not held on to.
const openerKeep = 1 << 20

// reset makes the buffers serve the next batch; the records open returned are not used after.
func (o *opener) reset() {
	clear(o.recs) // no stale record keeps its headers and key alive
	o.recs, o.plain = o.recs[:0], o.plain[:0]
	if cap(o.plain) > openerKeep {
		o.plain, o.recs = nil, nil
	}
}
