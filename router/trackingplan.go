package router

import (
	"bytes"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// Tracking plans with schemas (docs/routing.md#tracking-plans): a source whose trackingPlan
// names a plan (planId) has its track, identify and group calls checked against the plan's
// JSON Schemas, compiled once per version of the plan. Only such a source pays for it.

// PlanSnapshot is what the tracking-plan check reads of the tenant config besides Snapshot;
// *platform.Snapshot is one. A Snapshot without it checks no plan.
type PlanSnapshot interface {
	TrackingPlanByID(id string) (*schemas.Plan, bool)
}

// ViolationsUserID is the userId of the Violation Generated calls (as Segment's).
const ViolationsUserID = "schema-violations"

// checkPlan applies the source's tracking plan to one call: value is the call as ingest wrote
// it (opened, when sealed), body its delivered body (after headroom bytes). It returns the body to deliver (body itself, or a new one
// with unplanned or invalid properties omitted and context.violations added), out with the
// forwarded records appended, and whether the plan blocks the call.
func (s *Step) checkPlan(rec *kgo.Record, value []byte, src *schemas.Source, v *schemas.RoutingView, body []byte, headroom int, out Deliveries) ([]byte, Deliveries, bool) {
	opts := src.TrackingPlan
	ps, ok := s.Config.(PlanSnapshot)
	if !ok {
		return body, out, false
	}
	// A plan deleted while a source still names it (the console refuses that; a config
	// record written by hand may not) checks nothing.
	p, ok := ps.TrackingPlanByID(opts.PlanID)
	if !ok || p.Compiled() == nil {
		return body, out, false
	}
	field := v.Properties
	if v.Type != schemas.TypeTrack {
		field = v.Traits
	}
	r, err := p.Compiled().CheckField(opts, v.Type, v.Event, field, value)
	if err != nil { // unreachable: the body was decoded as an object already
		return body, out, false
	}
	vs := r.Violations
	if len(r.Common) > 0 {
		vs = append(vs[:len(vs):len(vs)], r.Common...)
	}
	forwardable := s.EventsTopic != "" && headerValue(rec, schemas.HeaderForwardedFrom) == nil
	if forwardable && opts.ForwardingViolationsTo != "" {
		for i := range vs {
			out.Forwarded = append(out.Forwarded, s.violationRecord(src, p, v, i, &vs[i], opts.ForwardingViolationsTo))
		}
	}
	if r.Blocked(opts, v.Type) {
		if forwardable && opts.ForwardingBlockedEventsTo != "" {
			out.Forwarded = append(out.Forwarded, s.forwardRecord(rec, src.ID, opts.ForwardingBlockedEventsTo))
		}
		return body, out, true
	}
	if len(r.Omit) == 0 && len(vs) == 0 {
		return body, out, false
	}
	return editBody(body, headroom, schemas.PlanField(v.Type), r.Omit, vs), out, false
}

// forwardRecord is rec (its key, value and data key, sealed or not) sent to the source to as
// a new tracking.events record.
func (s *Step) forwardRecord(rec *kgo.Record, from, to string) *kgo.Record {
	hs := make([]kgo.RecordHeader, 0, len(rec.Headers)+1)
	for _, h := range rec.Headers {
		if h.Key == schemas.HeaderSourceID {
			h.Value = []byte(to)
		}
		hs = append(hs, h)
	}
	hs = append(hs, kgo.RecordHeader{Key: schemas.HeaderForwardedFrom, Value: []byte(from)})
	return &kgo.Record{Topic: s.EventsTopic, Key: rec.Key, Value: rec.Value, Headers: hs}
}

// violationRecord is the i-th violation of a call as a Violation Generated track call to the
// source to (docs/routing.md#forwarding), with Segment's properties. Its messageId is derived
// from the call's, so routing the call again makes the same one (de-duplicated).
func (s *Step) violationRecord(src *schemas.Source, p *schemas.Plan, v *schemas.RoutingView, i int, vi *schemas.Violation, to string) *kgo.Record {
	id := "violation-" + v.MessageID + "-" + strconv.Itoa(i)
	b := make([]byte, 0, 512)
	b = append(b, `{"type":"track","event":"Violation Generated","userId":`...)
	b = schemas.AppendJSONString(b, ViolationsUserID)
	b = append(b, `,"messageId":`...)
	b = schemas.AppendJSONString(b, id)
	b = append(b, `,"properties":{"eventMessageID":`...)
	b = schemas.AppendJSONString(b, v.MessageID)
	b = append(b, `,"eventName":`...)
	b = schemas.AppendJSONString(b, v.Event)
	b = append(b, `,"eventType":`...)
	b = schemas.AppendJSONString(b, v.Type)
	b = append(b, `,"sourceID":`...)
	b = schemas.AppendJSONString(b, src.ID)
	b = append(b, `,"sourceName":`...)
	b = schemas.AppendJSONString(b, src.Name)
	b = append(b, `,"sourceSlug":`...)
	b = schemas.AppendJSONString(b, src.ID)
	b = append(b, `,"trackingPlanID":`...)
	b = schemas.AppendJSONString(b, p.ID)
	b = append(b, `,"trackingPlanName":`...)
	b = schemas.AppendJSONString(b, p.Name)
	b = append(b, `,"violationDescription":`...)
	b = schemas.AppendJSONString(b, vi.Description)
	b = append(b, `,"violationField":`...)
	b = schemas.AppendJSONString(b, vi.Field)
	b = append(b, `,"violationType":`...)
	b = schemas.AppendJSONString(b, vi.Type)
	b = append(b, `},"context":{"library":{"name":"tributary"}}`...)
	if len(s.FirstAttemptAt) > 0 {
		b = append(b, `,"timestamp":"`...)
		b = append(b, s.FirstAttemptAt...)
		b = append(b, `","receivedAt":"`...)
		b = append(b, s.FirstAttemptAt...)
		b = append(b, '"')
	}
	b = append(b, '}')
	return &kgo.Record{Topic: s.EventsTopic, Key: []byte(ViolationsUserID), Value: b, Headers: []kgo.RecordHeader{
		{Key: schemas.HeaderSourceID, Value: []byte(to)},
		{Key: schemas.HeaderMessageID, Value: []byte(id)},
		{Key: schemas.HeaderType, Value: typeValue(schemas.TypeTrack)},
		{Key: schemas.HeaderForwardedFrom, Value: []byte(src.ID)},
	}}
}

// editBody returns a new body (after the same headroom) with the keys omit removed from the
// member field ("properties", "traits") and, with violations, context.violations set.
func editBody(body []byte, headroom int, field string, omit []string, vs []schemas.Violation) []byte {
	msg := body[headroom:]
	out := make([]byte, headroom, headroom+len(msg)+64+128*len(vs)+shred.TagSize)
	out = append(out, '{')
	sawContext := false
	_ = schemas.EachMember(msg, func(k, val []byte) error {
		if len(out) > headroom+1 {
			out = append(out, ',')
		}
		out = schemas.AppendJSONString(out, string(k))
		out = append(out, ':')
		switch {
		case string(k) == field && len(omit) > 0:
			for _, key := range omit {
				val = schemas.WithoutMember(val, key)
			}
		case string(k) == "context" && len(vs) > 0 && bytes.HasPrefix(bytes.TrimSpace(val), []byte("{")):
			sawContext = true
			val = withViolations(val, vs)
		}
		out = append(out, val...)
		return nil
	})
	if !sawContext && len(vs) > 0 {
		if len(out) > headroom+1 {
			out = append(out, ',')
		}
		out = append(out, `"context":`...)
		out = append(out, withViolations(nil, vs)...)
	}
	return append(out, '}')
}

// withViolations returns the context object ctx (nil: none) with its member "violations" set to vs.
func withViolations(ctx []byte, vs []schemas.Violation) []byte {
	if len(ctx) > 0 {
		ctx = bytes.TrimSpace(schemas.WithoutMember(ctx, "violations"))
	}
	out := make([]byte, 0, len(ctx)+32+128*len(vs))
	if len(ctx) >= 2 {
		inner := bytes.TrimSpace(ctx[1 : len(ctx)-1])
		out = append(out, '{')
		out = append(out, inner...)
		if len(inner) > 0 {
			out = append(out, ',')
		}
	} else {
		out = append(out, '{')
	}
	out = append(out, `"violations":`...)
	out = schemas.AppendViolations(out, vs)
	return append(out, '}')
}
