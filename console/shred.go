package console

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/shred"
)

// opened returns r with its value in clear (docs/security.md#crypto-shredding): r itself when
// it is plain, a copy with the opened value when it is sealed, nil when it does not open —
// sealed with a shredded key (its user was deleted: the view never shows it), damaged, or its
// key not readable now (logged; the view goes without it).
func (s *Service) opened(r *kgo.Record) *kgo.Record {
	if shred.KeyOf(r) == nil {
		return r
	}
	plain, err := s.dataKeys.Open(r)
	if err != nil {
		if !errors.Is(err, shred.ErrShredded) {
			s.logger.Warn().Err(err).Str("topic", r.Topic).Int32("partition", r.Partition).Int64("offset", r.Offset).Msg("skipping a sealed record that does not open")
		}
		return nil
	}
	c := *r
	c.Value = plain
	return &c
}
