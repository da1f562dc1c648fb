package audiences

import (
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// Audience outputs (docs/audiences.md#outputs): a membership change is sent as an identify
// {<key>: true|false}, as Segment's track events "Audience Entered" / "Audience Exited", or
// both, as the audience's output says. The calls are records of the same transaction as the
// change that caused them, so they are sent exactly once, like the identify.

// Track events of audience outputs.
const (
	EventAudienceEntered = "Audience Entered"
	EventAudienceExited  = "Audience Exited"
)

// audienceOut is where and how one audience's membership changes are sent.
type audienceOut struct {
	key, source     string
	identify, track bool
}

// out is how the audience's current version sends.
func (d *audienceDef) out() audienceOut {
	return audienceOut{key: d.key, source: d.source, identify: d.identifyOut, track: d.trackOut}
}

// out is how the version recorded in the partition's metadata sent (a removed or older
// version of an audience).
func (md metaDef) out() audienceOut {
	identify, track := (&schemas.Audience{Output: md.Output}).Sends()
	return audienceOut{key: md.Key, source: md.Source, identify: identify, track: track}
}

// membership appends the calls that send one membership change of audience id: member true
// (joined) or false (left).
func (s *Service) membership(out []*kgo.Record, prof *profile, o audienceOut, id string, member bool, now int64) []*kgo.Record {
	if o.identify {
		out = append(out, s.identify(prof, o.key, o.source, id, classAudience, boolVal(member), now))
	}
	if o.track {
		out = append(out, s.audienceTrack(prof, o.key, o.source, id, member, now))
	}
	return out
}

// audienceTrack builds the track event of a membership change: "Audience Entered" (member)
// or "Audience Exited", with properties {"audience_key": key, key: member} and the
// context.personas of the identify. Its messageId is a new UUID, as the identify's is: the
// record is written once, in the transaction of the change.
func (s *Service) audienceTrack(prof *profile, key, source, id string, member bool, now int64) *kgo.Record {
	msgID := uuid.NewString()
	ts := recordTime(now)
	event := EventAudienceExited
	if member {
		event = EventAudienceEntered
	}
	b := make([]byte, 0, 448)
	b = append(b, `{"type":"track","messageId":`...)
	b = schemas.AppendJSONString(b, msgID)
	b, userKey := appendProfileID(b, prof)
	b = append(b, `,"event":`...)
	b = schemas.AppendJSONString(b, event)
	b = append(b, `,"properties":{"audience_key":`...)
	b = schemas.AppendJSONString(b, key)
	b = append(b, ',')
	b = schemas.AppendJSONString(b, key)
	b = append(b, ':')
	b = boolVal(member).appendJSON(b)
	b = append(b, '}')
	s.metrics.tracks.WithLabelValues(id).Inc()
	return s.callRecord(b, ts, classAudience, id, key, userKey, source, msgID, schemas.TypeTrack)
}

// appendProfileID appends the profile's "userId", else its "anonymousId", member; userKey is
// that id (the record's key).
func appendProfileID(b []byte, prof *profile) (_ []byte, userKey string) {
	if prof.userID() != "" {
		b = append(b, `,"userId":`...)
		return schemas.AppendJSONString(b, prof.userID()), prof.userID()
	}
	b = append(b, `,"anonymousId":`...)
	return schemas.AppendJSONString(b, prof.ID), prof.ID
}

// appendPersonas appends the context.personas object of a call about computation id (an
// audience or a computed trait, by class) with the trait key key.
func appendPersonas(b []byte, class, id, key string) []byte {
	b = append(b, `{"computation_class":`...)
	b = schemas.AppendJSONString(b, class)
	b = append(b, `,"computation_id":`...)
	b = schemas.AppendJSONString(b, id)
	b = append(b, `,"computation_key":`...)
	b = schemas.AppendJSONString(b, key)
	if class == classAudience {
		b = append(b, `,"audience_id":`...)
		b = schemas.AppendJSONString(b, id)
		b = append(b, `,"audience_key":`...)
		b = schemas.AppendJSONString(b, key)
	} else {
		b = append(b, `,"computed_trait_id":`...)
		b = schemas.AppendJSONString(b, id)
		b = append(b, `,"computed_trait_key":`...)
		b = schemas.AppendJSONString(b, key)
	}
	return append(b, '}')
}
