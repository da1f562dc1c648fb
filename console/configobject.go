package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The config objects of docs/configuration.md, read and written through the API. Validation is
// the config parser's own: a request body is parsed as one entry of the config file's list
// (schemas.ParseConfig: unknown fields, wrong types), and the config the change would make is
// validated whole (schemas.Config.Validate: every rule, across objects), so the API and a file
// can never disagree. Errors name the field relative to the object ("settings.webhooks").

// kinds maps a config kind to its list in a config file.
var lists = map[schemas.ConfigKind]string{
	schemas.ConfigKindSource:        "sources",
	schemas.ConfigKindDestination:   "destinations",
	schemas.ConfigKindAudience:      "audiences",
	schemas.ConfigKindComputedTrait: "computedTraits",
	schemas.ConfigKindTrackingPlan:  "trackingPlans",
}

// nouns name a kind in messages.
var nouns = map[schemas.ConfigKind]string{
	schemas.ConfigKindSource:        "source",
	schemas.ConfigKindDestination:   "destination",
	schemas.ConfigKindAudience:      "audience",
	schemas.ConfigKindComputedTrait: "computed trait",
	schemas.ConfigKindTrackingPlan:  "tracking plan",
	schemas.ConfigKindConsoleUser:   "user",
	schemas.ConfigKindAPIToken:      "API token",
	schemas.ConfigKindIdentity:      "identity rules",
}

// lookup returns the object of kind and id in snap (a tombstone ConfigObject when absent).
func lookup(snap *platform.Snapshot, kind schemas.ConfigKind, id string) (schemas.ConfigObject, bool) {
	o := schemas.ConfigObject{Kind: kind, ID: id}
	var ok bool
	switch kind {
	case schemas.ConfigKindSource:
		o.Source, ok = snap.SourceByID(id)
	case schemas.ConfigKindDestination:
		o.Destination, ok = snap.DestinationByID(id)
	case schemas.ConfigKindAudience:
		o.Audience, ok = snap.AudienceByID(id)
	case schemas.ConfigKindComputedTrait:
		o.ComputedTrait, ok = snap.ComputedTraitByID(id)
	case schemas.ConfigKindTrackingPlan:
		o.TrackingPlan, ok = snap.TrackingPlanByID(id)
	case schemas.ConfigKindConsoleUser:
		o.ConsoleUser, ok = snap.ConsoleUserByEmail(id)
	case schemas.ConfigKindAPIToken:
		o.APIToken, ok = snap.APITokenByID(id)
	case schemas.ConfigKindIdentity:
		o.Identity = snap.Identity()
		ok = o.Identity != nil && id == schemas.IdentityRulesID
	}
	return o, ok
}

// objectsOf is every object of snap: sources, destinations, audiences, computed traits, each
// kind in id order.
func objectsOf(snap *platform.Snapshot) []schemas.ConfigObject {
	var out []schemas.ConfigObject
	for _, x := range snap.Sources() {
		out = append(out, schemas.ConfigObject{Kind: schemas.ConfigKindSource, ID: x.ID, Source: x})
	}
	for _, x := range snap.Destinations() {
		out = append(out, schemas.ConfigObject{Kind: schemas.ConfigKindDestination, ID: x.ID, Destination: x})
	}
	for _, x := range snap.Audiences() {
		out = append(out, schemas.ConfigObject{Kind: schemas.ConfigKindAudience, ID: x.ID, Audience: x})
	}
	for _, x := range snap.ComputedTraits() {
		out = append(out, schemas.ConfigObject{Kind: schemas.ConfigKindComputedTrait, ID: x.ID, ComputedTrait: x})
	}
	for _, x := range snap.TrackingPlans() {
		out = append(out, schemas.ConfigObject{Kind: schemas.ConfigKindTrackingPlan, ID: x.ID, TrackingPlan: x})
	}
	// The user list is part of the config file (console.users); API tokens are not: they are
	// issued by the console (tokens.go), never exported, imported or pruned.
	for _, x := range snap.ConsoleUsers() {
		out = append(out, schemas.ConfigObject{Kind: schemas.ConfigKindConsoleUser, ID: x.Email, ConsoleUser: x})
	}
	if x := snap.Identity(); x != nil {
		out = append(out, schemas.ConfigObject{Kind: schemas.ConfigKindIdentity, ID: schemas.IdentityRulesID, Identity: x})
	}
	return out
}

// addTo appends a copy of the object to its list in cfg.
func addTo(cfg *schemas.Config, o schemas.ConfigObject) {
	switch {
	case o.Source != nil:
		cfg.Sources = append(cfg.Sources, *o.Source)
	case o.Destination != nil:
		cfg.Destinations = append(cfg.Destinations, *o.Destination)
	case o.Audience != nil:
		cfg.Audiences = append(cfg.Audiences, *o.Audience)
	case o.ComputedTrait != nil:
		cfg.ComputedTraits = append(cfg.ComputedTraits, *o.ComputedTrait)
	case o.TrackingPlan != nil:
		cfg.TrackingPlans = append(cfg.TrackingPlans, *o.TrackingPlan)
	case o.ConsoleUser != nil:
		if cfg.Console == nil {
			cfg.Console = &schemas.ConsoleConfig{}
		}
		cfg.Console.Users = append(cfg.Console.Users, *o.ConsoleUser)
	case o.Identity != nil:
		x := *o.Identity
		cfg.Identity = &x
	}
}

// configOf is the whole config of snap as a Config, with the object of candidate's key
// replaced by candidate (placed last in its list, so that a rule between two objects, a
// duplicate trait key, is reported on it) or removed when candidate is a tombstone.
func configOf(snap *platform.Snapshot, candidate schemas.ConfigObject) *schemas.Config {
	cfg := &schemas.Config{}
	for _, o := range objectsOf(snap) {
		if o.Kind != candidate.Kind || o.ID != candidate.ID {
			addTo(cfg, o)
		}
	}
	addTo(cfg, candidate)
	return cfg
}

// listLen is the length of a config's list.
func listLen(cfg *schemas.Config, list string) int {
	switch list {
	case "sources":
		return len(cfg.Sources)
	case "destinations":
		return len(cfg.Destinations)
	case "audiences":
		return len(cfg.Audiences)
	case "computedTraits":
		return len(cfg.ComputedTraits)
	case "trackingPlans":
		return len(cfg.TrackingPlans)
	}
	return 0
}

// entryPath matches a list entry in a validation message ("audiences[0].name").
var entryPath = regexp.MustCompile(`\b(sources|destinations|audiences|computedTraits|trackingPlans)\[(\d+)\]`)

// nounOf names a list's objects.
func nounOf(list string) string {
	switch list {
	case "computedTraits":
		return "computed trait"
	case "trackingPlans":
		return "tracking plan"
	}
	return strings.TrimSuffix(list, "s")
}

// named rewrites the list entries a message mentions as the objects' kinds and ids
// ("audiences[0].name" → "audience power-users's name").
func named(cfg *schemas.Config, msg string) string {
	return entryPath.ReplaceAllStringFunc(msg, func(m string) string {
		sub := entryPath.FindStringSubmatch(m)
		i, _ := strconv.Atoi(sub[2])
		if id := idAt(cfg, sub[1], i); id != "" {
			return nounOf(sub[1]) + " " + id
		}
		return m
	})
}

// idAt returns the id of entry i of a config's list.
func idAt(cfg *schemas.Config, list string, i int) string {
	switch {
	case list == "sources" && i < len(cfg.Sources):
		return cfg.Sources[i].ID
	case list == "destinations" && i < len(cfg.Destinations):
		return cfg.Destinations[i].ID
	case list == "audiences" && i < len(cfg.Audiences):
		return cfg.Audiences[i].ID
	case list == "computedTraits" && i < len(cfg.ComputedTraits):
		return cfg.ComputedTraits[i].ID
	case list == "trackingPlans" && i < len(cfg.TrackingPlans):
		return cfg.TrackingPlans[i].ID
	}
	return ""
}

// splitPath splits "destinations[3].settings.webhooks" into "destinations", 3 and
// "settings.webhooks"; ok is false for a path that is not inside a list entry.
func splitPath(path string) (list string, index int, rest string, ok bool) {
	open := strings.IndexByte(path, '[')
	end := strings.IndexByte(path, ']')
	if open <= 0 || end < open {
		return "", 0, "", false
	}
	n, err := strconv.Atoi(path[open+1 : end])
	if err != nil {
		return "", 0, "", false
	}
	return path[:open], n, strings.TrimPrefix(path[end+1:], "."), true
}

// invalid turns a config parser or validator error into the API's 400 (or, for a problem in
// another object than the candidate, the last entry of candidateList, a 409 in_use): the
// field is relative to the object, and other objects are named by kind and id.
func invalid(err error, cfg *schemas.Config, candidateList string) error {
	var errs schemas.ConfigErrors
	if !errors.As(err, &errs) || len(errs) == 0 {
		return errInvalid("", "%v", err)
	}
	candidate := 0 // a parsed body is entry 0
	if cfg != nil {
		candidate = listLen(cfg, candidateList) - 1
	}
	ae := &apiError{Status: http.StatusBadRequest, Code: codeInvalid}
	for _, e := range errs {
		msg := e.Message
		if cfg != nil {
			msg = named(cfg, msg)
		}
		fe := fieldError{Field: e.Path, Message: msg}
		if list, i, rest, ok := splitPath(e.Path); ok {
			if list == candidateList && i == candidate {
				fe.Field = rest
				// The parser names an unknown field in its message: the field is that one.
				if name, ok := strings.CutPrefix(e.Message, `unknown field "`); ok {
					if end := strings.IndexByte(name, '"'); end > 0 {
						fe.Field = strings.TrimPrefix(rest+"."+name[:end], ".")
					}
				}
			} else if cfg != nil {
				// Another object is no longer valid with this change: say which.
				fe = fieldError{Message: fmt.Sprintf("%s %s: %s: %s", nounOf(list), idAt(cfg, list, i), rest, msg)}
				if ae.Status == http.StatusBadRequest && len(ae.Errors) == 0 {
					ae.Status, ae.Code = http.StatusConflict, codeInUse
				}
			}
		}
		ae.Errors = append(ae.Errors, fe)
	}
	ae.Field, ae.Message = ae.Errors[0].Field, ae.Errors[0].Message
	if ae.Field != "" {
		ae.Message = ae.Field + ": " + ae.Message
	}
	if len(ae.Errors) == 1 {
		ae.Errors = nil
	}
	return ae
}

// parseObject parses a request body as one object of kind, with the config parser: the body
// must be a JSON object; unknown fields and wrong types are errors naming the field. The
// read-only fields of a read answer (version, origin) are ignored.
func parseObject(kind schemas.ConfigKind, body []byte) (schemas.ConfigObject, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' || !json.Valid(body) {
		return schemas.ConfigObject{}, errInvalid("", "the body must be one JSON object")
	}
	if bytes.Contains(body, []byte(`"version"`)) || bytes.Contains(body, []byte(`"origin"`)) {
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) == nil {
			for _, f := range readOnlyFields {
				delete(m, f)
			}
			body, _ = json.Marshal(m)
		}
	}
	list := lists[kind]
	doc := make([]byte, 0, len(body)+len(list)+8)
	doc = append(append(append(append(doc, `{"`...), list...), `":[`...), body...)
	doc = append(doc, "]}"...)
	cfg, err := schemas.ParseConfig(doc, schemas.ConfigFormatJSON)
	if err != nil {
		return schemas.ConfigObject{}, invalid(err, nil, list)
	}
	o := schemas.ConfigObject{Kind: kind}
	switch kind {
	case schemas.ConfigKindSource:
		o.Source = &cfg.Sources[0]
		o.ID = o.Source.ID
	case schemas.ConfigKindDestination:
		o.Destination = &cfg.Destinations[0]
		o.ID = o.Destination.ID
	case schemas.ConfigKindAudience:
		o.Audience = &cfg.Audiences[0]
		o.ID = o.Audience.ID
	case schemas.ConfigKindComputedTrait:
		o.ComputedTrait = &cfg.ComputedTraits[0]
		o.ID = o.ComputedTrait.ID
	case schemas.ConfigKindTrackingPlan:
		o.TrackingPlan = &cfg.TrackingPlans[0]
		o.ID = o.TrackingPlan.ID
	}
	return o, nil
}

// objectJSON is the object's JSON as in a config file (no origin); secrets included: never
// answered, only merged with a patch.
func objectJSON(o schemas.ConfigObject) (map[string]any, error) {
	var v any
	switch {
	case o.Source != nil:
		v = o.Source
	case o.Destination != nil:
		v = o.Destination
	case o.Audience != nil:
		v = o.Audience
	case o.ComputedTrait != nil:
		v = o.ComputedTrait
	case o.TrackingPlan != nil:
		v = o.TrackingPlan
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	delete(m, "origin")
	return m, nil
}

// mergePatch applies an RFC 7396 JSON merge patch to target.
func mergePatch(target map[string]any, patch map[string]any) map[string]any {
	if target == nil {
		target = map[string]any{}
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(target, k)
		case map[string]any:
			t, _ := target[k].(map[string]any)
			target[k] = mergePatch(t, pv)
		default:
			target[k] = v
		}
	}
	return target
}

// aggregates are the keys of a computed trait's computation: exactly one is set.
var aggregates = []string{"count", "sum", "avg", "min", "max", "first", "last", "mostFrequent", "uniqueList"}

// replaceWhole makes the parts of an object that are one value replace the current one instead
// of merging into it (a merge would mix two rules): an audience's rule, and a computed trait's
// computation (giving one removes the others), a tracking plan's rules. It removes them from target and returns patch.
func replaceWhole(kind schemas.ConfigKind, target, patch map[string]any) map[string]any {
	switch kind {
	case schemas.ConfigKindAudience:
		if _, ok := patch["rule"]; ok {
			delete(target, "rule")
		}
	case schemas.ConfigKindTrackingPlan:
		// Its schemas are values, not objects to merge into.
		if _, ok := patch["rules"]; ok {
			delete(target, "rules")
		}
	case schemas.ConfigKindComputedTrait:
		for _, k := range aggregates {
			if _, ok := patch[k]; ok {
				for _, a := range aggregates {
					delete(target, a)
				}
				break
			}
		}
	}
	return patch
}

// readOnlyFields are fields of a read answer that a client may send back in a body; they are
// ignored (version is checked through If-Match, not the body).
var readOnlyFields = []string{"version", "origin"}
