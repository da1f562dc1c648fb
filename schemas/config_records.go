package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ConfigRecord is one record of the compacted topic TopicConfig: Key is "source/<id>",
// "destination/<id>" or "audience/<id>"; Value is the object's JSON, or nil for a tombstone
// (the object was deleted).
type ConfigRecord struct {
	Key   string
	Value []byte
}

// ConfigKind is the kind of object a config record holds: the part of its key before '/'.
type ConfigKind string

// The kinds of config objects.
const (
	ConfigKindSource      ConfigKind = "source"
	ConfigKindDestination ConfigKind = "destination"
	ConfigKindAudience    ConfigKind = "audience"
	// ConfigKindComputedTrait is a computed trait: key "computed-trait/<id>".
	ConfigKindComputedTrait ConfigKind = "computed-trait"
)

// ConfigObject is one decoded config record: its kind, its id, and the object of that kind,
// or no object at all for a tombstone.
type ConfigObject struct {
	Kind ConfigKind
	ID   string
	// Exactly one of these is set, matching Kind, unless the record is a tombstone.
	Source        *Source
	Destination   *Destination
	Audience      *Audience
	ComputedTrait *ComputedTrait
	TrackingPlan  *Plan
	ConsoleUser   *ConsoleUser
	APIToken      *APIToken
	Identity      *IdentityRules
}

// Key returns the record key: "<kind>/<id>".
func (o ConfigObject) Key() string { return string(o.Kind) + "/" + o.ID }

// Deleted reports whether the record is a tombstone: the object no longer exists.
func (o ConfigObject) Deleted() bool {
	return o.Source == nil && o.Destination == nil && o.Audience == nil && o.ComputedTrait == nil && o.TrackingPlan == nil && o.ConsoleUser == nil && o.APIToken == nil && o.Identity == nil
}

// Records returns one TopicConfig record per object of a valid config: tracking plans, then
// sources, then destinations, then audiences, then computed traits, each in file order. It runs Validate first and returns its
// error. Source records carry writeKeyHash, never the plaintext writeKey. Records writes no
// tombstones: deleting objects absent from a file is the caller's choice.
func (c *Config) Records() ([]ConfigRecord, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	out := make([]ConfigRecord, 0, len(c.Sources)+len(c.Destinations)+len(c.Audiences)+len(c.ComputedTraits)+len(c.TrackingPlans))
	// Tracking plans first: a reader of the topic never sees a source that names a plan it has
	// not read yet.
	for i := range c.TrackingPlans {
		r, err := c.TrackingPlans[i].Record()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	for i := range c.Sources {
		r, err := c.Sources[i].Record()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	for i := range c.Destinations {
		r, err := c.Destinations[i].Record()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	for i := range c.Audiences {
		r, err := c.Audiences[i].Record()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	for i := range c.ComputedTraits {
		r, err := c.ComputedTraits[i].Record()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if c.Console != nil {
		for i := range c.Console.Users {
			r, err := c.Console.Users[i].Record()
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	if c.Identity != nil {
		r, err := c.Identity.Record()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Record returns the source's TopicConfig record after Validate; the value has writeKeyHash in
// place of writeKey, so the plaintext key is never stored.
func (s *Source) Record() (ConfigRecord, error) {
	if err := s.Validate(); err != nil {
		return ConfigRecord{}, fmt.Errorf("source %q: %w", s.ID, err)
	}
	rest := *s
	rest.WriteKeyHash, rest.WriteKey = s.KeyHash(), ""
	return marshalRecord(ConfigKeySource+s.ID, &rest)
}

// Record returns the destination's TopicConfig record after Validate.
func (d *Destination) Record() (ConfigRecord, error) {
	if err := d.Validate(); err != nil {
		return ConfigRecord{}, fmt.Errorf("destination %q: %w", d.ID, err)
	}
	if d.AutoDisabled != nil && d.IsEnabled() {
		// Enabled again (the console, the API or a config file): no longer auto-disabled
		// (docs/delivery.md#auto-disable).
		c := *d
		c.AutoDisabled = nil
		d = &c
	}
	return marshalRecord(ConfigKeyDestination+d.ID, d)
}

// Record returns the audience's TopicConfig record after Validate.
func (a *Audience) Record() (ConfigRecord, error) {
	if err := a.Validate(); err != nil {
		return ConfigRecord{}, fmt.Errorf("audience %q: %w", a.ID, err)
	}
	return marshalRecord(ConfigKeyAudience+a.ID, a)
}

// Record returns the computed trait's TopicConfig record after Validate.
func (t *ComputedTrait) Record() (ConfigRecord, error) {
	if err := t.Validate(); err != nil {
		return ConfigRecord{}, fmt.Errorf("computed trait %q: %w", t.ID, err)
	}
	return marshalRecord(ConfigKeyComputedTrait+t.ID, t)
}

func marshalRecord(key string, v any) (ConfigRecord, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return ConfigRecord{}, fmt.Errorf("encoding config record %s: %w", key, err)
	}
	return ConfigRecord{Key: key, Value: b}, nil
}

// DecodeConfigRecord decodes one TopicConfig record. The key must be "<kind>/<id>" with a
// valid id; an empty value is a tombstone (ConfigObject.Deleted). Otherwise the value is
// decoded as strictly as a config file (unknown fields are errors), must pass the object's
// Validate, must carry the id of its key, and a source must carry writeKeyHash, not writeKey.
// A record with encrypted secrets (SealConfigRecord) is an error: see DecodeConfigRecordWith.
func DecodeConfigRecord(key string, value []byte) (ConfigObject, error) {
	return DecodeConfigRecordWith(key, value, nil)
}

// DecodeConfigRecordWith is DecodeConfigRecord decrypting the record's encrypted secrets
// with keys (nil: none may be encrypted). Plain secrets are read as they are, with or
// without keys.
func DecodeConfigRecordWith(key string, value []byte, keys *Keyring) (ConfigObject, error) {
	kind, id, ok := strings.Cut(key, "/")
	obj := ConfigObject{Kind: ConfigKind(kind), ID: id}
	switch {
	case !ok || (obj.Kind != ConfigKindSource && obj.Kind != ConfigKindDestination && obj.Kind != ConfigKindAudience && obj.Kind != ConfigKindComputedTrait && obj.Kind != ConfigKindTrackingPlan && obj.Kind != ConfigKindConsoleUser && obj.Kind != ConfigKindAPIToken && obj.Kind != ConfigKindIdentity):
		return ConfigObject{}, fmt.Errorf("config record key %q: want source/<id>, destination/<id>, audience/<id>, computed-trait/<id>, tracking-plan/<id>, console-user/<email>, api-token/<id> or %s", key, ConfigKeyIdentity)
	case obj.Kind == ConfigKindIdentity && id != IdentityRulesID:
		return ConfigObject{}, fmt.Errorf("config record key %q: the identity rules' key is %s", key, ConfigKeyIdentity)
	case obj.Kind == ConfigKindConsoleUser:
		if e, err := NormalizeEmail(id); err != nil || e != id {
			return ConfigObject{}, fmt.Errorf("config record key %q: the id must be an email address in lower case", key)
		}
		if len(value) == 0 {
			return obj, nil
		}
	case !validID(id):
		return ConfigObject{}, fmt.Errorf("config record key %q: the id must be non-empty and contain only a-z, 0-9, '-' and '_'", key)
	case len(value) == 0:
		return obj, nil
	}
	var target interface {
		check(v *validator, path string)
		objectID() string
	}
	switch obj.Kind {
	case ConfigKindSource:
		obj.Source = &Source{}
		target = obj.Source
	case ConfigKindDestination:
		obj.Destination = &Destination{}
		target = obj.Destination
	case ConfigKindAudience:
		obj.Audience = &Audience{}
		target = obj.Audience
	case ConfigKindComputedTrait:
		obj.ComputedTrait = &ComputedTrait{}
		target = obj.ComputedTrait
	case ConfigKindTrackingPlan:
		obj.TrackingPlan = &Plan{}
		target = obj.TrackingPlan
	case ConfigKindConsoleUser:
		obj.ConsoleUser = &ConsoleUser{}
		target = obj.ConsoleUser
	case ConfigKindAPIToken:
		obj.APIToken = &APIToken{}
		target = obj.APIToken
	case ConfigKindIdentity:
		obj.Identity = &IdentityRules{}
		target = obj.Identity
	}
	lines, err := decodeStrict(value, ConfigFormatJSON, target)
	if err == nil && obj.Destination != nil {
		err = obj.Destination.openSecrets(key, keys)
	}
	if err == nil {
		v := &validator{lines: lines}
		target.check(v, "")
		err = v.errs.errOrNil()
	}
	switch {
	case err != nil:
	case obj.Source != nil && obj.Source.WriteKey != "":
		err = errors.New("a source record must carry writeKeyHash, never the plaintext writeKey")
	case target.objectID() != id:
		err = fmt.Errorf("the value has id %q", target.objectID())
	}
	if err != nil {
		return ConfigObject{}, fmt.Errorf("config record %s: %w", key, err)
	}
	return obj, nil
}

func (s *Source) objectID() string        { return s.ID }
func (d *Destination) objectID() string   { return d.ID }
func (a *Audience) objectID() string      { return a.ID }
func (t *ComputedTrait) objectID() string { return t.ID }
