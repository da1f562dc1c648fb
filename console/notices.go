package console

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The auto-disable notices (docs/delivery.md#auto-disable): tributary.notices, followed from
// its start, keeps each destination's latest notice for the overview's problems; the
// auto-disabled state itself is read from the config (schemas.Destination.AutoDisabled).

// noticeBoard is the latest notice of each destination. Its methods are safe for concurrent use.
type noticeBoard struct {
	mu sync.Mutex
	m  map[string]schemas.Notice
}

func newNoticeBoard() *noticeBoard { return &noticeBoard{m: map[string]schemas.Notice{}} }

// add keeps n if it is the destination's latest.
func (b *noticeBoard) add(n schemas.Notice) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.m[n.DestinationID]; !ok || old.At <= n.At {
		b.m[n.DestinationID] = n
	}
}

// latest returns the latest notice of destination id.
func (b *noticeBoard) latest(id string) (schemas.Notice, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.m[id]
	return n, ok
}

// runNotices follows tributary.notices into s.notices.
func (s *Service) runNotices(ctx context.Context) error {
	return s.runView(ctx, "notices", make(chan struct{}), platform.TopicReaderConfig{
		Topic: s.cfg.NoticesTopic,
		Apply: func(r *kgo.Record) {
			if n, err := schemas.ParseNotice(r.Value); err == nil && n.DestinationID != "" {
				s.notices.add(n)
			}
		},
	}, nil)
}

// autoDisableProblem is the overview's problem of destination d about auto-disable at now, ""
// when there is none: it is auto-disabled, or a destination.failing notice says it will be
// (until its disable time passes).
func (s *Service) autoDisableProblem(d *schemas.Destination, now time.Time) string {
	if d.IsAutoDisabled() {
		a := d.AutoDisabled
		return "Destination " + d.ID + " was auto-disabled at " + a.At + ": every attempt failed for " + schemas.ShortDuration(time.Duration(a.After)) +
			" since " + a.FailingSince + ". Its messages are parked until it is enabled again."
	}
	if !d.IsEnabled() || d.Settings.AutoDisable == nil {
		return ""
	}
	n, ok := s.notices.latest(d.ID)
	if !ok || n.Type != schemas.NoticeDestinationFailing {
		return ""
	}
	if at, err := schemas.ParseTimestamp(n.DisableAt); err != nil || !now.Before(at) {
		return ""
	}
	return "Destination " + d.ID + " has failed every attempt since " + n.FailingSince + " (" + strconv.Itoa(n.Percent) +
		" % of its auto-disable budget of " + n.After + "): it is disabled at " + n.DisableAt + " unless a message is delivered before."
}
