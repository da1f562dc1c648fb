package audiences

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/tributary-cdp/tributary/schemas"
)

// A profile's recent track events, kept for the Segment Profile API's /events when
// AUDIENCES_PROFILE_EVENTS > 0 (docs/audiences.md#profile-events): at most that many per
// profile, none older than AUDIENCES_PROFILE_EVENTS_LOOKBACK, in the order of their time. They
// are part of the profile, so they are on audiences.state with it (sealed with the user's key,
// deleted with the user, restored after a restart or a rebalance, exactly once as the rest).

// maxProfileEvents bounds AUDIENCES_PROFILE_EVENTS.
const maxProfileEvents = 1000

// maxTrackedProperties bounds the JSON of the properties kept of one event: an event with
// more is kept without them.
const maxTrackedProperties = 2048

// tracked is one kept track event: what the /events answer shows of it (its context is not
// kept).
type tracked struct {
	At        int64   `json:"t"` // its time (eventTime), unix ms
	Event     string  `json:"e"`
	MessageID string  `json:"m,omitempty"`
	Source    string  `json:"s,omitempty"` // the source id of its record
	Props     rawJSON `json:"p,omitempty"` // its properties, compact JSON
}

// rawJSON is a JSON value kept as its text (a string is 8 bytes smaller than a slice).
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) {
	if r == "" {
		return []byte("null"), nil
	}
	return []byte(r), nil
}

func (r *rawJSON) UnmarshalJSON(b []byte) error {
	if string(b) != "null" {
		*r = rawJSON(b)
	}
	return nil
}

// keepTrack keeps a track event (its time at) on its profile when the profile keeps events.
func (s *Service) keepTrack(b *batch, prof *profile, m *schemas.Message, at int64) {
	t := tracked{At: at, Event: s.intern.str(m.Event), MessageID: m.MessageID, Source: s.intern.str(b.source)}
	if len(m.Properties) > 0 && len(m.Properties) <= maxTrackedProperties {
		var buf bytes.Buffer
		if json.Compact(&buf, m.Properties) == nil && buf.Len() > 2 { // {} is not kept
			t.Props = rawJSON(buf.String())
		}
	}
	prof.addTrack(t, s.cfg.ProfileEvents, b.now-s.cfg.ProfileEventsLookback.Milliseconds())
}

// tracks are the profile's kept events (nil: none).
func (p *profile) tracks() []tracked {
	if p.rare == nil {
		return nil
	}
	return p.rare.Tracks
}

// setTracks keeps ts as the profile's events (none: nil).
func (p *profile) setTracks(ts []tracked) {
	if len(ts) == 0 {
		if p.rare != nil {
			p.rare.Tracks = nil
			p.tidy()
		}
		return
	}
	p.more().Tracks = ts
}

// addTrack adds t in the order of time, keeping at most keep events, none before cutoff (ms).
func (p *profile) addTrack(t tracked, keep int, cutoff int64) {
	p.pruneTracks(cutoff)
	if t.At < cutoff || keep <= 0 {
		return
	}
	ts := p.tracks()
	if n := len(ts) - keep; n > 0 { // the setting was lowered
		ts = slices.Delete(ts, 0, n)
	}
	i := len(ts)
	for i > 0 && ts[i-1].At > t.At {
		i--
	}
	switch {
	case len(ts) < keep:
		ts = insertOne(ts, i, t)
	case i == 0:
		// older than every kept one
	default:
		copy(ts, ts[1:i]) // the oldest goes
		ts[i-1] = t
	}
	p.setTracks(ts)
}

// pruneTracks drops the kept events before cutoff (ms).
func (p *profile) pruneTracks(cutoff int64) {
	ts := p.tracks()
	k := 0
	for k < len(ts) && ts[k].At < cutoff {
		k++
	}
	if k > 0 {
		p.setTracks(slices.Delete(ts, 0, k))
	}
}

// absorbTracks merges the kept events of a profile merged into p: in the order of time, a
// message kept by both once, as many as the larger of the two keeps (both are bounded by
// AUDIENCES_PROFILE_EVENTS).
func (p *profile) absorbTracks(o []tracked) {
	if len(o) == 0 {
		return
	}
	mine := p.tracks()
	keep := max(len(mine), len(o))
	all := make([]tracked, 0, len(mine)+len(o))
	all = append(all, mine...)
	for _, t := range o {
		if t.MessageID == "" || !slices.ContainsFunc(mine, func(h tracked) bool { return h.MessageID == t.MessageID }) {
			all = append(all, t)
		}
	}
	slices.SortStableFunc(all, func(a, b tracked) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	if len(all) > keep {
		all = all[len(all)-keep:]
	}
	p.setTracks(slices.Clone(all))
}
