package router

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// FilterCache holds the compiled filters of one config snapshot's destinations
// (docs/routing.md#destination-filters): each destination's are compiled the first time one of
// its messages is routed, and all are dropped when the snapshot changes. It is used by one
// goroutine at a time (the events pipe's); the zero FilterCache is ready.
type FilterCache struct {
	config Snapshot
	byDest map[*schemas.Destination]*schemas.CompiledFilters
	// dropped counts, when set, the messages each filter dropped (tributary_router_filtered_total).
	dropped *prometheus.CounterVec
}

// NewFilterCache returns a cache that counts the messages each filter drops on dropped
// (labels destination, filter); nil: not counted.
func NewFilterCache(dropped *prometheus.CounterVec) *FilterCache {
	return &FilterCache{dropped: dropped}
}

// of returns d's compiled filters for the snapshot config.
func (c *FilterCache) of(config Snapshot, d *schemas.Destination) *schemas.CompiledFilters {
	if c.config != config || c.byDest == nil {
		c.config, c.byDest = config, map[*schemas.Destination]*schemas.CompiledFilters{}
	}
	cf, ok := c.byDest[d]
	if !ok {
		cf = schemas.CompileFilters(d)
		c.byDest[d] = cf
	}
	return cf
}

func (c *FilterCache) count(destID, filter string) {
	if c.dropped != nil {
		c.dropped.WithLabelValues(destID, filter).Inc()
	}
}

// applyFilters runs d's filters on the message (s.fmsg holds body[headroom:]): droppedBy names
// the filter that sampled it out or dropped it (counted), "" when none did; own is the body of
// its own the destination gets when property filters changed it, made from body (the shared
// body, in clear, after headroom bytes) and sealed with key when the message is; nil when it
// shares the message's body.
func (s *Step) applyFilters(d *schemas.Destination, sourceID string, body []byte, v *schemas.RoutingView, key *shred.Key, headroom int) (own []byte, droppedBy string) {
	if s.Filters == nil {
		s.Filters = &FilterCache{}
	}
	cf := s.Filters.of(s.Config, d)
	if cf == nil {
		return nil, ""
	}
	fd := cf.Decide(sourceID, v.MessageID, &s.fmsg, nil)
	if fd.Dropped() {
		name := cf.Name(fd.DroppedBy) // required: never ""
		s.Filters.count(d.ID, name)
		return nil, name
	}
	if fd.Rewrites == 0 {
		return nil, ""
	}
	own = cf.AppendRewrittenFrom(make([]byte, headroom, len(body)+shred.TagSize), &s.fmsg, fd)
	if key != nil {
		own = key.SealReserved(own)
	}
	return own, ""
}
