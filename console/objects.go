package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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
}

// nouns name a kind in messages.
var nouns = map[schemas.ConfigKind]string{
	schemas.ConfigKindSource:        "source",
	schemas.ConfigKindDestination:   "destination",
	schemas.ConfigKindAudience:      "audience",
	schemas.ConfigKindComputedTrait: "computed trait",
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
	}
	return 0
}

// entryPath matches a list entry in a validation message ("audiences[0].name").
var entryPath = regexp.MustCompile(`\b(sources|destinations|audiences|computedTraits)\[(\d+)\]`)

// nounOf names a list's objects.
func nounOf(list string) string {
	if list == "computedTraits" {
		return "computed trait"
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
// computation (giving one removes the others). It removes them from target and returns patch.
func replaceWhole(kind schemas.ConfigKind, target, patch map[string]any) map[string]any {
	switch kind {
	case schemas.ConfigKindAudience:
		if _, ok := patch["rule"]; ok {
			delete(target, "rule")
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

// record is the object's tributary.config record, sealed with CONFIG_ENCRYPTION_KEY.
func (s *Service) record(o schemas.ConfigObject) (schemas.ConfigRecord, error) {
	var rec schemas.ConfigRecord
	var err error
	switch {
	case o.Source != nil:
		rec, err = o.Source.Record()
	case o.Destination != nil:
		rec, err = o.Destination.Record()
	case o.Audience != nil:
		rec, err = o.Audience.Record()
	case o.ComputedTrait != nil:
		rec, err = o.ComputedTrait.Record()
	default:
		return schemas.ConfigRecord{Key: o.Key()}, nil // a tombstone
	}
	if err != nil {
		return rec, err
	}
	return schemas.SealConfigRecord(rec, s.keys)
}

// applyWait bounds how long a write waits to see itself in the config store.
const applyWait = 10 * time.Second

// writeObjects writes records to tributary.config, waits for Kafka's acknowledgement, then
// until the console's own config store has applied them (so the answer, and the next read,
// show the change). Call it with writeMu held.
func (s *Service) writeObjects(ctx context.Context, objs ...schemas.ConfigObject) (*platform.Snapshot, error) {
	recs := make([]*kgo.Record, 0, len(objs))
	for _, o := range objs {
		rec, err := s.record(o)
		if err != nil {
			return nil, err
		}
		if n := len(rec.Key) + len(rec.Value); n > maxRecordBytes {
			return nil, errTooLarge("%s %s is %d bytes as stored in %s, more than the %d bytes of a record: make it smaller", o.Kind, o.ID, n, s.cfg.ConfigTopic, maxRecordBytes)
		}
		recs = append(recs, &kgo.Record{Topic: s.cfg.ConfigTopic, Key: []byte(rec.Key), Value: rec.Value})
	}
	if err := s.producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return nil, fmt.Errorf("writing %s: %w", s.cfg.ConfigTopic, err)
	}
	for _, o := range objs {
		s.metrics.configWrites.WithLabelValues(string(o.Kind)).Inc()
		s.logger.Info().Str("key", o.Key()).Bool("deleted", o.Deleted()).Msg("config object written")
	}
	wctx, cancel := context.WithTimeout(ctx, applyWait)
	defer cancel()
	snap, err := s.deps.Store.WaitFor(wctx, func(sn *platform.Snapshot) bool {
		for i, o := range objs {
			rev := sn.Revision(o.Kind, o.ID)
			want := recs[i].Offset + 1
			if o.Deleted() && rev != 0 && rev <= want || !o.Deleted() && rev < want {
				return false
			}
		}
		return true
	})
	if err != nil {
		// Written and acknowledged: it will apply; answer from the current view.
		s.logger.Warn().Err(err).Msg("a config write is not visible in the console's store yet")
		return s.deps.Store.Snapshot(), nil
	}
	return snap, nil
}

// writeOptions are the conditions of a write: the request's If-Match and ?takeOver=true.
type writeOptions struct {
	// IfMatch is an If-Match header: a version as an ETag ("12", 12, W/"12", several
	// separated by commas) or *; "": no condition.
	IfMatch string
	// TakeOver lets the write change an object a config file manages (it becomes the
	// console's).
	TakeOver bool
}

// optionsOf reads the write options of an API request.
func optionsOf(r *http.Request) writeOptions {
	return writeOptions{IfMatch: r.Header.Get("If-Match"), TakeOver: r.URL.Query().Get("takeOver") == "true"}
}

// ifMatch checks an If-Match value against the object's current version: a mismatch is 409.
func ifMatch(h, noun, id string, current int64) error {
	h = strings.TrimSpace(h)
	if h == "" || h == "*" {
		return nil
	}
	for _, tag := range strings.Split(h, ",") {
		tag = strings.Trim(strings.TrimPrefix(strings.TrimSpace(tag), "W/"), `"`)
		if v, err := strconv.ParseInt(tag, 10, 64); err == nil && v == current {
			return nil
		}
	}
	return &apiError{Status: http.StatusConflict, Code: codeVersion,
		Message: fmt.Sprintf("%s %s is at version %d, not %s: read it again and re-apply your change", noun, id, current, h)}
}

// manageable refuses a change to an object a config file manages, unless the write takes it
// over: applying the file would undo the change.
func manageable(takeOver bool, o schemas.ConfigObject) error {
	origin := o.Origin()
	if !strings.HasPrefix(origin, schemas.OriginFilePrefix) || takeOver {
		return nil
	}
	return &apiError{Status: http.StatusConflict, Code: codeManagedByFile,
		Message: fmt.Sprintf("%s is managed by %s: change it in that file, or add ?takeOver=true to manage it from the console from now on (the file must then stop listing it)", o.Key(), origin)}
}

// etag sets the ETag of a versioned answer.
func etag(w http.ResponseWriter, version int64) {
	w.Header().Set("ETag", `"`+strconv.FormatInt(version, 10)+`"`)
}

// readOnlyFields are fields of a read answer that a client may send back in a body; they are
// ignored (version is checked through If-Match, not the body).
var readOnlyFields = []string{"version", "origin"}

// decodePatch reads a JSON merge-patch body: a JSON object.
func decodePatch(w http.ResponseWriter, r *http.Request) (map[string]any, error) {
	b, err := readBody(w, r)
	if err != nil {
		return nil, err
	}
	var patch map[string]any
	if err := json.Unmarshal(b, &patch); err != nil || patch == nil {
		return nil, errInvalid("", "the body must be one JSON object (a JSON merge patch, RFC 7396)")
	}
	for _, f := range readOnlyFields {
		delete(patch, f)
	}
	return patch, nil
}

// update applies patch to the object of kind and id, validates the result, writes it and
// answers the object.
func (s *Service) update(w http.ResponseWriter, r *http.Request, kind schemas.ConfigKind, id string, patch map[string]any,
	prepare func(cur schemas.ConfigObject, merged map[string]any) error) error {
	return s.updateAnswer(w, r, kind, id, patch, prepare, nil)
}

// updateAnswer is update; extra adds fields to the answer.
func (s *Service) updateAnswer(w http.ResponseWriter, r *http.Request, kind schemas.ConfigKind, id string, patch map[string]any,
	prepare func(cur schemas.ConfigObject, merged map[string]any) error, extra func(v map[string]any)) error {
	snap, err := s.updateObject(r.Context(), kind, id, patch, optionsOf(r), prepare)
	if err != nil {
		return err
	}
	return s.answerObject(w, snap, kind, id, http.StatusOK, extra)
}

// updateObject applies a JSON merge patch to the object of kind and id, validates the result
// with the config parser and writes it (the API's PATCH and the UI's forms); prepare, when
// set, may check or adjust the merged object against the current one. It returns the
// snapshot that holds the change.
func (s *Service) updateObject(ctx context.Context, kind schemas.ConfigKind, id string, patch map[string]any, opts writeOptions,
	prepare func(cur schemas.ConfigObject, merged map[string]any) error) (*platform.Snapshot, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	snap := s.deps.Store.Snapshot()
	cur, ok := lookup(snap, kind, id)
	if !ok {
		return nil, errNotFound("no %s %q", nouns[kind], id)
	}
	if err := ifMatch(opts.IfMatch, nouns[kind], id, snap.Revision(kind, id)); err != nil {
		return nil, err
	}
	if err := manageable(opts.TakeOver, cur); err != nil {
		return nil, err
	}
	if pid, ok := patch["id"]; ok && pid != id {
		return nil, errInvalid("id", "the id cannot change (create a new %s instead)", nouns[kind])
	}
	m, err := objectJSON(cur)
	if err != nil {
		return nil, err
	}
	merged := mergePatch(m, replaceWhole(kind, m, patch))
	if prepare != nil {
		if err := prepare(cur, merged); err != nil {
			return nil, err
		}
	}
	body, err := json.Marshal(merged)
	if err != nil {
		return nil, err
	}
	next, err := parseObject(kind, body)
	if err != nil {
		return nil, err
	}
	if next.Destination != nil {
		if err := unmaskSecrets(cur.Destination, next.Destination, ""); err != nil {
			return nil, err
		}
	}
	next.SetOrigin(schemas.OriginConsole)
	cfg := configOf(snap, next)
	if err := cfg.Validate(); err != nil {
		return nil, invalid(err, cfg, lists[kind])
	}
	return s.writeObjects(ctx, next)
}

// create validates a new object, writes it and answers it.
func (s *Service) create(w http.ResponseWriter, r *http.Request, o schemas.ConfigObject, extra func(v map[string]any)) error {
	snap, err := s.createObject(r.Context(), o)
	if err != nil {
		return err
	}
	return s.answerObject(w, snap, o.Kind, o.ID, http.StatusCreated, extra)
}

// checkNew validates a new object against the current config without writing it (409 when its
// id is taken): the UI's step-by-step validation. A new destination may hold no masked value.
func (s *Service) checkNew(o schemas.ConfigObject) error {
	if o.Destination != nil {
		if err := unmaskSecrets(nil, o.Destination, ""); err != nil {
			return err
		}
	}
	snap := s.deps.Store.Snapshot()
	if _, exists := lookup(snap, o.Kind, o.ID); exists && o.ID != "" {
		return &apiError{Status: http.StatusConflict, Code: codeConflict, Field: "id",
			Message: fmt.Sprintf("id: a %s with id %q exists already", nouns[o.Kind], o.ID)}
	}
	o.SetOrigin(schemas.OriginConsole)
	cfg := configOf(snap, o)
	if err := cfg.Validate(); err != nil {
		return invalid(err, cfg, lists[o.Kind])
	}
	return nil
}

// createObject validates a new object and writes it; an existing id is 409.
func (s *Service) createObject(ctx context.Context, o schemas.ConfigObject) (*platform.Snapshot, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if err := s.checkNew(o); err != nil {
		return nil, err
	}
	o.SetOrigin(schemas.OriginConsole)
	return s.writeObjects(ctx, o)
}

// remove deletes the object of kind and id and answers 204.
func (s *Service) remove(w http.ResponseWriter, r *http.Request, kind schemas.ConfigKind, id string) error {
	if err := s.removeObject(r.Context(), kind, id, optionsOf(r)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// removeObject deletes the object of kind and id (a tombstone); an object others depend on is
// 409.
func (s *Service) removeObject(ctx context.Context, kind schemas.ConfigKind, id string, opts writeOptions) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	snap := s.deps.Store.Snapshot()
	cur, ok := lookup(snap, kind, id)
	if !ok {
		return errNotFound("no %s %q", nouns[kind], id)
	}
	if err := ifMatch(opts.IfMatch, nouns[kind], id, snap.Revision(kind, id)); err != nil {
		return err
	}
	if err := manageable(opts.TakeOver, cur); err != nil {
		return err
	}
	gone := schemas.ConfigObject{Kind: kind, ID: id}
	cfg := configOf(snap, gone)
	if err := cfg.Validate(); err != nil {
		ae := invalid(err, cfg, "").(*apiError)
		ae.Status, ae.Code = http.StatusConflict, codeInUse
		ae.Message = fmt.Sprintf("%s %s is in use: %s", nouns[kind], id, ae.Message)
		return ae
	}
	_, err := s.writeObjects(ctx, gone)
	return err
}

// answerObject answers one object's view from snap, with its version as ETag; extra adds
// fields (a new write key, once).
func (s *Service) answerObject(w http.ResponseWriter, snap *platform.Snapshot, kind schemas.ConfigKind, id string, status int, extra func(v map[string]any)) error {
	o, ok := lookup(snap, kind, id)
	if !ok {
		return errNotFound("no %s %q", nouns[kind], id)
	}
	v := view(snap, o, s.now())
	if extra != nil {
		extra(v)
	}
	etag(w, snap.Revision(kind, id))
	writeData(w, status, v)
	return nil
}

// view is the API's form of an object: its config fields without secrets, its origin and its
// version. Sources show no write key (only at creation and rotation); destinations show
// hasSharedSecret instead of the secret, and their header values and URL credentials masked
// (secrets.go).
func view(snap *platform.Snapshot, o schemas.ConfigObject, now time.Time) map[string]any {
	m, err := objectJSON(o)
	if err != nil {
		m = map[string]any{"id": o.ID}
	}
	switch {
	case o.Source != nil:
		delete(m, "writeKey")
		delete(m, "writeKeyHash")
		delete(m, "previousWriteKeyHash")
		if exp, err := schemas.ParseTimestamp(o.Source.PreviousWriteKeyExpiresAt); err != nil || !exp.After(now) {
			delete(m, "previousWriteKeyExpiresAt")
		}
	case o.Destination != nil:
		m["enabled"] = o.Destination.IsEnabled()
		if o.Destination.Sources == nil {
			m["sources"] = []string{}
		}
		if st, ok := m["settings"].(map[string]any); ok {
			delete(st, "sharedSecret")
			delete(st, "previousSharedSecret")
			st["hasSharedSecret"] = o.Destination.Settings.SharedSecret != ""
			st["hasPreviousSharedSecret"] = o.Destination.Settings.PreviousSharedSecret != ""
			maskWebhooks(st, o.Destination)
		}
	}
	m["origin"] = o.Origin()
	m["version"] = snap.Revision(o.Kind, o.ID)
	return m
}

// list answers every object of kind.
func (s *Service) list(w http.ResponseWriter, kind schemas.ConfigKind) error {
	snap := s.deps.Store.Snapshot()
	now := s.now()
	out := []map[string]any{}
	for _, o := range objectsOf(snap) {
		if o.Kind == kind {
			out = append(out, view(snap, o, now))
		}
	}
	writeData(w, http.StatusOK, out)
	return nil
}

func (s *Service) get(w http.ResponseWriter, r *http.Request, kind schemas.ConfigKind) error {
	return s.answerObject(w, s.deps.Store.Snapshot(), kind, r.PathValue("id"), http.StatusOK, nil)
}

// createFrom parses the body as a new object of kind and creates it.
func (s *Service) createFrom(w http.ResponseWriter, r *http.Request, kind schemas.ConfigKind) error {
	b, err := readBody(w, r)
	if err != nil {
		return err
	}
	o, err := parseObject(kind, b)
	if err != nil {
		return err
	}
	return s.create(w, r, o, nil)
}

func (s *Service) updateFrom(w http.ResponseWriter, r *http.Request, kind schemas.ConfigKind) error {
	patch, err := decodePatch(w, r)
	if err != nil {
		return err
	}
	return s.update(w, r, kind, r.PathValue("id"), patch, nil)
}

// Sources.

// newWriteKey returns a fresh random write key: "wk_" and 32 URL-safe characters (192 bits).
func newWriteKey() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "wk_" + base64.RawURLEncoding.EncodeToString(b)
}

func (s *Service) createSource(w http.ResponseWriter, r *http.Request) error {
	b, err := readBody(w, r)
	if err != nil {
		return err
	}
	o, err := parseObject(schemas.ConfigKindSource, b)
	if err != nil {
		return err
	}
	src := o.Source
	switch {
	case src.WriteKey != "":
		return errInvalid("writeKey", "writeKey: the console generates the write key: leave it out")
	case src.WriteKeyHash != "" || src.PreviousWriteKeyHash != "" || src.PreviousWriteKeyExpiresAt != "":
		return errInvalid("writeKeyHash", "writeKeyHash: the console generates the write key: leave it out")
	}
	key := newWriteKey()
	src.WriteKey = key
	return s.create(w, r, o, func(v map[string]any) { v["writeKey"] = key })
}

func (s *Service) updateSource(w http.ResponseWriter, r *http.Request) error {
	patch, err := decodePatch(w, r)
	if err != nil {
		return err
	}
	delete(patch, "previousWriteKeyExpiresAt") // read-only: a read answers it
	for _, f := range []string{"writeKey", "writeKeyHash", "previousWriteKeyHash"} {
		if _, ok := patch[f]; ok {
			return errInvalid(f, "%s: change the write key with POST /v1/sources/%s/rotate-key", f, r.PathValue("id"))
		}
	}
	return s.update(w, r, schemas.ConfigKindSource, r.PathValue("id"), patch, nil)
}

// rotateRequest is the body of POST /v1/sources/{id}/rotate-key.
type rotateRequest struct {
	// Overlap is how long the old key keeps working ("24h"; "0s": it stops at once).
	Overlap *string `json:"overlap"`
}

// defaultOverlap is the overlap of a rotation that names none.
const defaultOverlap = 24 * time.Hour

func (s *Service) rotateKey(w http.ResponseWriter, r *http.Request) error {
	var req rotateRequest
	if err := decodeJSON(w, r, &req, true); err != nil {
		return err
	}
	overlap := defaultOverlap
	if req.Overlap != nil {
		d, err := time.ParseDuration(*req.Overlap)
		switch {
		case err != nil:
			return errInvalid("overlap", "overlap: %q is not a duration such as \"24h\"", *req.Overlap)
		case d < 0 || d > s.cfg.MaxKeyOverlap:
			return errInvalid("overlap", "overlap: must be between 0s and %s, got %s", schemas.ShortDuration(s.cfg.MaxKeyOverlap), *req.Overlap)
		}
		overlap = d
	}
	key := newWriteKey()
	id := r.PathValue("id")
	return s.updateAnswer(w, r, schemas.ConfigKindSource, id, map[string]any{}, func(cur schemas.ConfigObject, merged map[string]any) error {
		delete(merged, "writeKeyHash")
		merged["writeKey"] = key
		if overlap > 0 {
			merged["previousWriteKeyHash"] = cur.Source.KeyHash()
			merged["previousWriteKeyExpiresAt"] = schemas.FormatTimestamp(s.now().Add(overlap))
		} else {
			delete(merged, "previousWriteKeyHash")
			delete(merged, "previousWriteKeyExpiresAt")
		}
		return nil
	}, func(v map[string]any) { v["writeKey"] = key })
}

// Destinations.

// updateDestination applies a merge patch; the settings' read-only fields (hasSharedSecret)
// are ignored, a secret left out of the patch is kept, and so is a header value or URL sent
// back masked as it was read (unmaskSecrets).
func (s *Service) updateDestination(w http.ResponseWriter, r *http.Request) error {
	patch, err := decodePatch(w, r)
	if err != nil {
		return err
	}
	if st, ok := patch["settings"].(map[string]any); ok {
		delete(st, "hasSharedSecret")
		delete(st, "hasPreviousSharedSecret")
	}
	return s.update(w, r, schemas.ConfigKindDestination, r.PathValue("id"), patch, nil)
}

// connectSource adds a source to the destination's sources (idempotent).
func (s *Service) connectSource(w http.ResponseWriter, r *http.Request) error {
	src := r.PathValue("sourceId")
	return s.update(w, r, schemas.ConfigKindDestination, r.PathValue("id"), map[string]any{}, func(cur schemas.ConfigObject, merged map[string]any) error {
		if !slices.Contains(cur.Destination.Sources, src) {
			merged["sources"] = append(slices.Clone(cur.Destination.Sources), src)
		}
		return nil
	})
}

// disconnectSource removes a source from the destination's sources (idempotent).
func (s *Service) disconnectSource(w http.ResponseWriter, r *http.Request) error {
	src := r.PathValue("sourceId")
	return s.update(w, r, schemas.ConfigKindDestination, r.PathValue("id"), map[string]any{}, func(cur schemas.ConfigObject, merged map[string]any) error {
		merged["sources"] = slices.DeleteFunc(slices.Clone(cur.Destination.Sources), func(x string) bool { return x == src })
		return nil
	})
}

// The handlers of a kind whose API is the generic one (audiences, computed traits; sources and
// destinations for what has no special case).

func (s *Service) listOf(kind schemas.ConfigKind) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, _ *http.Request) error { return s.list(w, kind) }
}

func (s *Service) getOf(kind schemas.ConfigKind) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error { return s.get(w, r, kind) }
}

func (s *Service) createOf(kind schemas.ConfigKind) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error { return s.createFrom(w, r, kind) }
}

func (s *Service) updateOf(kind schemas.ConfigKind) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error { return s.updateFrom(w, r, kind) }
}

func (s *Service) deleteOf(kind schemas.ConfigKind) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error { return s.remove(w, r, kind, r.PathValue("id")) }
}
