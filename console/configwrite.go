package console

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The config write path: the one service layer under the API's handlers (api_objects.go) and
// the UI's forms (ui_*.go). Its methods take a context, a kind and id, a patch or an object
// and writeOptions, never an HTTP request or response; they return the snapshot that holds
// the change, or an *apiError whose code and status the front ends show (the API as its JSON
// error body, the UI next to the form's fields): not_found, version_mismatch (If-Match),
// managed_by_file, conflict (an id taken), in_use and invalid (configobject.go).
//
// Writes are serialized across every console and tributary-init (docs/console.md#more-than-one-console):
// each is a transaction of the config writers' transactional id (platform.ConfigWriter). It
// takes the id, which fences every other writer; waits until the console's config store (read
// committed) has read tributary.config up to the ends the transaction listed, so that the
// snapshot holds every committed write; runs the checks (If-Match, origin, validation)
// against that snapshot; writes and commits. A write another writer fenced before it committed
// runs again from the checks, which then see the other write: a stale If-Match is then 409
// version_mismatch. Within one console, writeMu keeps its own writes from fencing each other.

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
	case o.TrackingPlan != nil:
		rec, err = o.TrackingPlan.Record()
	case o.ConsoleUser != nil:
		rec, err = o.ConsoleUser.Record()
	case o.APIToken != nil:
		rec, err = o.APIToken.Record()
	case o.Identity != nil:
		rec, err = o.Identity.Record()
	default:
		return schemas.ConfigRecord{Key: o.Key()}, nil // a tombstone
	}
	if err != nil {
		return rec, err
	}
	return schemas.SealConfigRecord(rec, s.keys)
}

// applyWait bounds how long a write waits to see itself in the config store, and how long a
// write's checks wait for the store to read every committed write.
const applyWait = 10 * time.Second

// configTx runs check-and-write in a transaction of the config writers
// (platform.ConfigWriter), with writeMu held: fn gets the snapshot that holds every write
// committed before the transaction fenced the other writers, checks against it, and writes
// with writeObjects. If another writer fenced this one before it committed, fn runs again on a
// newer snapshot (its checks see that writer's change). Other writers fencing every attempt,
// or a store that does not catch up, are 503 unavailable.
func (s *Service) configTx(ctx context.Context, fn func(snap *platform.Snapshot) error) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	err := s.writer.Write(ctx, func(ctx context.Context, tx *platform.ConfigTx) error {
		wctx, cancel := context.WithTimeout(ctx, applyWait)
		defer cancel()
		snap, err := s.deps.Store.WaitFor(wctx, func(sn *platform.Snapshot) bool { return sn.ReadThrough(tx.Ends()) })
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &apiError{Status: http.StatusServiceUnavailable, Code: codeUnavailable,
				Message: fmt.Sprintf("the console has not read %s up to its last committed write yet: try again", s.cfg.ConfigTopic)}
		}
		s.tx = tx
		defer func() { s.tx = nil }()
		return fn(snap)
	})
	if errors.Is(err, platform.ErrConfigWriteContended) {
		return &apiError{Status: http.StatusServiceUnavailable, Code: codeUnavailable,
			Message: "other consoles or tributary-init kept writing the config at the same time: try again"}
	}
	return err
}

// writeObjects writes records to tributary.config in the current transaction (configTx; one
// of its own when called outside one), commits, and waits until the console's own config
// store has applied them (so the answer, and the next read, show the change) while the commit
// is confirmed (platform.ConfigTx.CommitWaiting). Call it with writeMu held.
func (s *Service) writeObjects(ctx context.Context, objs ...schemas.ConfigObject) (*platform.Snapshot, error) {
	before := s.deps.Store.Snapshot() // for the audit trail: the config the write changes
	recs := make([]schemas.ConfigRecord, 0, len(objs))
	for _, o := range objs {
		rec, err := s.record(o)
		if err != nil {
			return nil, err
		}
		if n := len(rec.Key) + len(rec.Value); n > maxRecordBytes {
			return nil, errTooLarge("%s %s is %d bytes as stored in %s, more than the %d bytes of a record: make it smaller", o.Kind, o.ID, n, s.cfg.ConfigTopic, maxRecordBytes)
		}
		recs = append(recs, rec)
	}
	var (
		snap    *platform.Snapshot
		waitErr error
	)
	produce := func(ctx context.Context, tx *platform.ConfigTx) error {
		offsets, err := tx.Produce(ctx, recs...)
		if err != nil {
			return err
		}
		// The answer is the store's first snapshot that holds the write, waited for while the
		// commit is confirmed (its marker read back), not after: another writer's next write
		// does not get into it.
		return tx.CommitWaiting(ctx, func(ctx context.Context) {
			wctx, cancel := context.WithTimeout(ctx, applyWait)
			defer cancel()
			snap, waitErr = s.deps.Store.WaitFor(wctx, func(sn *platform.Snapshot) bool {
				for i, o := range objs {
					rev := sn.Revision(o.Kind, o.ID)
					want := offsets[i] + 1
					if o.Deleted() && rev != 0 && rev <= want || !o.Deleted() && rev < want {
						return false
					}
				}
				return true
			})
		})
	}
	var err error
	if s.tx != nil {
		err = produce(ctx, s.tx)
	} else {
		err = s.writer.Write(ctx, produce)
	}
	if err != nil {
		return nil, err
	}
	s.auditWrites(ctx, before, objs)
	for _, o := range objs {
		s.metrics.configWrites.WithLabelValues(string(o.Kind)).Inc()
		s.logger.Info().Str("key", o.Key()).Bool("deleted", o.Deleted()).Msg("config object written")
	}
	if waitErr != nil {
		// Committed: it will apply; answer from the current view.
		s.logger.Warn().Err(waitErr).Msg("a config write is not visible in the console's store yet")
		return s.deps.Store.Snapshot(), nil
	}
	return snap, nil
}

// writeOptions are the conditions of a write: the API's If-Match header and ?takeOver=true,
// the UI's form fields version and takeOver.
type writeOptions struct {
	// IfMatch is the version the write expects, written as an If-Match header is: a version
	// as an ETag ("12", 12, W/"12", several separated by commas) or *; "": no condition.
	IfMatch string
	// TakeOver lets the write change an object a config file manages (it becomes the
	// console's).
	TakeOver bool
	// DryRun validates the write without writing it (the UI's edit form: every field's error
	// at once, the form's own with the config's).
	DryRun bool
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

// updateObject applies a JSON merge patch to the object of kind and id, validates the result
// with the config parser and writes it (the API's PATCH and the UI's forms); prepare, when
// set, may check or adjust the merged object against the current one. It returns the
// snapshot that holds the change.
func (s *Service) updateObject(ctx context.Context, kind schemas.ConfigKind, id string, patch map[string]any, opts writeOptions,
	prepare func(cur schemas.ConfigObject, merged map[string]any) error) (*platform.Snapshot, error) {
	if opts.DryRun { // checks only: no transaction
		return s.updateIn(ctx, s.deps.Store.Snapshot(), kind, id, patch, opts, prepare)
	}
	var out *platform.Snapshot
	err := s.configTx(ctx, func(snap *platform.Snapshot) (err error) {
		out, err = s.updateIn(ctx, snap, kind, id, patch, opts, prepare)
		return err
	})
	return out, err
}

// updateIn is updateObject's check and write against snap (configTx's).
func (s *Service) updateIn(ctx context.Context, snap *platform.Snapshot, kind schemas.ConfigKind, id string, patch map[string]any, opts writeOptions,
	prepare func(cur schemas.ConfigObject, merged map[string]any) error) (*platform.Snapshot, error) {
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
	if opts.DryRun {
		return snap, nil
	}
	return s.writeObjects(ctx, next)
}

// checkNew validates a new object against the current config without writing it (409 when its
// id is taken): the UI's step-by-step validation. A new destination may hold no masked value.
func (s *Service) checkNew(o schemas.ConfigObject) error {
	return s.checkNewIn(s.deps.Store.Snapshot(), o)
}

// checkNewIn is checkNew against snap.
func (s *Service) checkNewIn(snap *platform.Snapshot, o schemas.ConfigObject) error {
	if o.Destination != nil {
		if err := unmaskSecrets(nil, o.Destination, ""); err != nil {
			return err
		}
	}
	if _, exists := lookup(snap, o.Kind, o.ID); exists && o.ID != "" {
		return &apiError{Status: http.StatusConflict, Code: codeConflict, Field: "id",
			Message: fmt.Sprintf("id: a %s with id %q exists already", nouns[o.Kind], o.ID)}
	}
	return validateIn(snap, o)
}

// validateObject validates o as the console's object in the current config, as a write of it
// would (the preview of an audience's rule).
func (s *Service) validateObject(o schemas.ConfigObject) error {
	return validateIn(s.deps.Store.Snapshot(), o)
}

// validateIn validates the config snap would be with o, the console's, in it.
func validateIn(snap *platform.Snapshot, o schemas.ConfigObject) error {
	o.SetOrigin(schemas.OriginConsole)
	cfg := configOf(snap, o)
	if err := cfg.Validate(); err != nil {
		return invalid(err, cfg, lists[o.Kind])
	}
	return nil
}

// createObject validates a new object and writes it; an existing id is 409.
func (s *Service) createObject(ctx context.Context, o schemas.ConfigObject) (*platform.Snapshot, error) {
	var out *platform.Snapshot
	err := s.configTx(ctx, func(snap *platform.Snapshot) (err error) {
		if err := s.checkNewIn(snap, o); err != nil {
			return err
		}
		o.SetOrigin(schemas.OriginConsole)
		out, err = s.writeObjects(ctx, o)
		return err
	})
	return out, err
}

// removeObject deletes the object of kind and id (a tombstone); an object others depend on is
// 409.
func (s *Service) removeObject(ctx context.Context, kind schemas.ConfigKind, id string, opts writeOptions) error {
	return s.configTx(ctx, func(snap *platform.Snapshot) error { return s.removeIn(ctx, snap, kind, id, opts) })
}

// removeIn is removeObject's check and write against snap (configTx's).
func (s *Service) removeIn(ctx context.Context, snap *platform.Snapshot, kind schemas.ConfigKind, id string, opts writeOptions) error {
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

// newWriteKey returns a fresh random write key: "wk_" and 32 URL-safe characters (192 bits).
func newWriteKey() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "wk_" + base64.RawURLEncoding.EncodeToString(b)
}

// createJSON parses body as a new object of kind with the config parser (createObject's
// checks then apply) and creates it.
func (s *Service) createJSON(ctx context.Context, kind schemas.ConfigKind, body []byte) (*platform.Snapshot, error) {
	o, err := parseObject(kind, body)
	if err != nil {
		return nil, err
	}
	return s.createObject(ctx, o)
}

// newSource creates the new source o with a fresh write key, which it returns (the only
// time it is shown: the config keeps its hash). A source that brings a key or a key hash is
// refused: the console generates the write key.
func (s *Service) newSource(ctx context.Context, o schemas.ConfigObject) (*platform.Snapshot, string, error) {
	src := o.Source
	switch {
	case src == nil:
		return nil, "", errInvalid("", "not a source")
	case src.WriteKey != "":
		return nil, "", errInvalid("writeKey", "writeKey: the console generates the write key: leave it out")
	case src.WriteKeyHash != "" || src.PreviousWriteKeyHash != "" || src.PreviousWriteKeyExpiresAt != "":
		return nil, "", errInvalid("writeKeyHash", "writeKeyHash: the console generates the write key: leave it out")
	}
	key := newWriteKey()
	src.WriteKey = key
	snap, err := s.createObject(ctx, o)
	if err != nil {
		return nil, "", err
	}
	return snap, key, nil
}

// rotateWriteKey gives the source id a fresh write key, which it returns; the old key keeps
// working for overlap (0: it stops at once, at most MaxKeyOverlap), until expiresAt ("" when
// overlap is 0).
func (s *Service) rotateWriteKey(ctx context.Context, id string, overlap time.Duration, opts writeOptions) (snap *platform.Snapshot, key, expiresAt string, err error) {
	if overlap < 0 || overlap > s.cfg.MaxKeyOverlap {
		return nil, "", "", errInvalid("overlap", "overlap: must be between 0s and %s, got %s", schemas.ShortDuration(s.cfg.MaxKeyOverlap), schemas.ShortDuration(overlap))
	}
	ctx = withAuditAction(ctx, actionRotateKey)
	key = newWriteKey()
	if overlap > 0 {
		expiresAt = schemas.FormatTimestamp(s.now().Add(overlap))
	}
	snap, err = s.updateObject(ctx, schemas.ConfigKindSource, id, map[string]any{}, opts, func(cur schemas.ConfigObject, merged map[string]any) error {
		delete(merged, "writeKeyHash")
		merged["writeKey"] = key
		if overlap > 0 {
			merged["previousWriteKeyHash"] = cur.Source.KeyHash()
			merged["previousWriteKeyExpiresAt"] = expiresAt
		} else {
			delete(merged, "previousWriteKeyHash")
			delete(merged, "previousWriteKeyExpiresAt")
		}
		return nil
	})
	if err != nil {
		return nil, "", "", err
	}
	return snap, key, expiresAt, nil
}

// setSourceConnected adds the source src to the destination dest's sources (connected) or
// removes it; both are idempotent.
func (s *Service) setSourceConnected(ctx context.Context, dest, src string, connected bool, opts writeOptions) (*platform.Snapshot, error) {
	return s.updateObject(ctx, schemas.ConfigKindDestination, dest, map[string]any{}, opts, func(cur schemas.ConfigObject, merged map[string]any) error {
		sources := cur.Destination.Sources
		switch {
		case !connected:
			merged["sources"] = slices.DeleteFunc(slices.Clone(sources), func(x string) bool { return x == src })
		case !slices.Contains(sources, src):
			merged["sources"] = append(slices.Clone(sources), src)
		}
		return nil
	})
}
