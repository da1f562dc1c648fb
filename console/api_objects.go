package console

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The API's handlers of the config objects (docs/console.md): each reads its request (the
// body, If-Match, ?takeOver=true), calls the config write path (configwrite.go) and answers
// the object's view with its version as ETag. They hold no rule of their own beyond what the
// request may contain.

// optionsOf reads the write options of an API request.
func optionsOf(r *http.Request) writeOptions {
	return writeOptions{IfMatch: r.Header.Get("If-Match"), TakeOver: r.URL.Query().Get("takeOver") == "true"}
}

// etag sets the ETag of a versioned answer.
func etag(w http.ResponseWriter, version int64) {
	w.Header().Set("ETag", `"`+strconv.FormatInt(version, 10)+`"`)
}

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

// answerWrite answers a write's error, or the object of kind and id from the snapshot that
// holds the write (status 200 or 201); extra adds fields to the answer (a new write key, once).
func (s *Service) answerWrite(w http.ResponseWriter, snap *platform.Snapshot, err error, kind schemas.ConfigKind, id string, status int, extra func(v map[string]any)) error {
	if err != nil {
		return err
	}
	return s.answerObject(w, snap, kind, id, status, extra)
}

// update applies the merge patch to the object of kind and id and answers it.
func (s *Service) update(w http.ResponseWriter, r *http.Request, kind schemas.ConfigKind, id string, patch map[string]any) error {
	snap, err := s.updateObject(r.Context(), kind, id, patch, optionsOf(r), nil)
	return s.answerWrite(w, snap, err, kind, id, http.StatusOK, nil)
}

// remove deletes the object of kind and id and answers 204.
func (s *Service) remove(w http.ResponseWriter, r *http.Request, kind schemas.ConfigKind, id string) error {
	if err := s.removeObject(r.Context(), kind, id, optionsOf(r)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
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
	snap, err := s.createObject(r.Context(), o)
	return s.answerWrite(w, snap, err, kind, o.ID, http.StatusCreated, nil)
}

func (s *Service) updateFrom(w http.ResponseWriter, r *http.Request, kind schemas.ConfigKind) error {
	patch, err := decodePatch(w, r)
	if err != nil {
		return err
	}
	return s.update(w, r, kind, r.PathValue("id"), patch)
}

// createSource creates a source with a fresh write key, answered this once.
func (s *Service) createSource(w http.ResponseWriter, r *http.Request) error {
	b, err := readBody(w, r)
	if err != nil {
		return err
	}
	o, err := parseObject(schemas.ConfigKindSource, b)
	if err != nil {
		return err
	}
	snap, key, err := s.newSource(r.Context(), o)
	return s.answerWrite(w, snap, err, o.Kind, o.ID, http.StatusCreated, func(v map[string]any) { v["writeKey"] = key })
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
	return s.update(w, r, schemas.ConfigKindSource, r.PathValue("id"), patch)
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
	id := r.PathValue("id")
	snap, key, _, err := s.rotateWriteKey(r.Context(), id, overlap, optionsOf(r))
	return s.answerWrite(w, snap, err, schemas.ConfigKindSource, id, http.StatusOK, func(v map[string]any) { v["writeKey"] = key })
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
	delete(patch, "autoDisabled") // read-only: enabling clears it (docs/delivery.md#auto-disable)
	if st, ok := patch["settings"].(map[string]any); ok {
		delete(st, "hasSharedSecret")
		delete(st, "hasPreviousSharedSecret")
	}
	return s.update(w, r, schemas.ConfigKindDestination, r.PathValue("id"), patch)
}

// connectSource adds a source to the destination's sources (idempotent).
func (s *Service) connectSource(w http.ResponseWriter, r *http.Request) error {
	return s.connected(w, r, true)
}

// disconnectSource removes a source from the destination's sources (idempotent).
func (s *Service) disconnectSource(w http.ResponseWriter, r *http.Request) error {
	return s.connected(w, r, false)
}

func (s *Service) connected(w http.ResponseWriter, r *http.Request, connected bool) error {
	id := r.PathValue("id")
	snap, err := s.setSourceConnected(r.Context(), id, r.PathValue("sourceId"), connected, optionsOf(r))
	return s.answerWrite(w, snap, err, schemas.ConfigKindDestination, id, http.StatusOK, nil)
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
