package console

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// The config write path's methods (configwrite.go), called as the API's handlers and the UI's
// forms call them: no HTTP request, a typed *apiError for what a front end shows as 4xx.

// writeFileConfig is applied as a config file (origin file:base.yaml) before the console starts.
const writeFileConfig = `
sources:
  - id: web
    name: Web site
    writeKey: wk_test_web_0123456789
destinations:
  - id: file-hooks
    type: webhooks
    name: File hooks
    sources: [web]
    settings:
      webhooks:
        - url: http://127.0.0.1:9/file
`

// newWriteService starts a console on the embedded broker, with writeFileConfig applied.
func newWriteService(t *testing.T) *Service {
	t.Helper()
	env := servicetest.New(t, servicetest.Options{})
	path := filepath.Join(t.TempDir(), "base.yaml")
	if err := os.WriteFile(path, []byte(writeFileConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := platform.ApplyConfigFile(env.Ctx, env.Kafka, schemas.TopicConfig, path, platform.ApplyOptions{}, env.Logger); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.WaitFor(env.Ctx, func(s *platform.Snapshot) bool { _, ok := s.DestinationByID("file-hooks"); return ok }); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Token = "test-console-token-0123456789"
	cfg.RegulationStores = []string{schemas.StoreRouter, schemas.StoreAudiences, schemas.StoreConsole}
	cfg.ShutdownTimeout = 2 * time.Second
	s, err := New(cfg, Deps{Deps: platform.Deps{Kafka: env.Kafka, KafkaOpts: env.KafkaOpts, Logger: env.Logger, Health: platform.NewHealth()}, Store: env.Store})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	env.Start("console", s.Run)
	return s
}

// wantError fails unless err is an *apiError of status and code.
func wantError(t *testing.T, what string, err error, status int, code string) *apiError {
	t.Helper()
	var ae *apiError
	if !errors.As(err, &ae) {
		t.Fatalf("%s: error %v (%T), want an *apiError %d %s", what, err, err, status, code)
	}
	if ae.Status != status || ae.Code != code {
		t.Fatalf("%s: %d %s (%s), want %d %s", what, ae.Status, ae.Code, ae.Message, status, code)
	}
	return ae
}

func buyers() schemas.ConfigObject {
	return schemas.ConfigObject{Kind: schemas.ConfigKindAudience, ID: "buyers", Audience: &schemas.Audience{ID: "buyers", Name: "Buyers", Source: "web",
		Rule: schemas.Condition{Event: "Order Completed"}}}
}

// TestWriteCreate: a new object is written as the console's and is in the snapshot answered; an
// id taken is 409 conflict on the id, an invalid object 400 invalid on its field, and neither
// writes.
func TestWriteCreate(t *testing.T) {
	s := newWriteService(t)
	ctx := context.Background()
	snap, err := s.createObject(ctx, buyers())
	if err != nil {
		t.Fatal(err)
	}
	a, ok := snap.AudienceByID("buyers")
	if !ok || a.Origin != schemas.OriginConsole || snap.Revision(schemas.ConfigKindAudience, "buyers") == 0 {
		t.Fatalf("created audience in the answered snapshot: %+v, %v", a, ok)
	}
	dup := buyers()
	dup.Audience.Name = "Other buyers"
	if ae := wantError(t, "an id taken", func() error { _, err := s.createObject(ctx, dup); return err }(), http.StatusConflict, codeConflict); ae.Field != "id" {
		t.Fatalf("an id taken: field %q, want id", ae.Field)
	}
	ghost := buyers()
	ghost.ID, ghost.Audience.ID, ghost.Audience.Name, ghost.Audience.Source = "ghosts", "ghosts", "Ghosts", "ghost"
	if ae := wantError(t, "an unknown source", func() error { _, err := s.createObject(ctx, ghost); return err }(), http.StatusBadRequest, codeInvalid); ae.Field != "source" {
		t.Fatalf("an unknown source: field %q (%s), want source", ae.Field, ae.Message)
	}
	// Parsed from JSON as the API's body and the UI's forms are: the parser's errors name the field.
	_, err = s.createJSON(ctx, schemas.ConfigKindAudience, []byte(`{"id":"x","name":"X","source":"web","rule":{"event":"A"},"colour":"red"}`))
	if ae := wantError(t, "an unknown field", err, http.StatusBadRequest, codeInvalid); ae.Field != "colour" {
		t.Fatalf("an unknown field: field %q, want colour", ae.Field)
	}
	now := s.deps.Store.Snapshot()
	if a, _ := now.AudienceByID("buyers"); a.Name != "Buyers" {
		t.Fatalf("a refused create changed the audience: %+v", a)
	}
	if _, ok := now.AudienceByID("ghosts"); ok {
		t.Fatal("a refused create was written")
	}
}

// TestWriteUpdateIfMatch: an update under If-Match is taken at the current version (as a
// number, an ETag, a weak ETag, one of several, or *) and refused at any other with 409
// version_mismatch, writing nothing.
func TestWriteUpdateIfMatch(t *testing.T) {
	s := newWriteService(t)
	ctx := context.Background()
	snap, err := s.createObject(ctx, buyers())
	if err != nil {
		t.Fatal(err)
	}
	for i, tag := range []string{"%d", `"%d"`, `W/"%d"`, `"1", "%d"`, "*", ""} {
		v := snap.Revision(schemas.ConfigKindAudience, "buyers")
		h := strings.ReplaceAll(tag, "%d", strconv.FormatInt(v, 10))
		name := "Buyers " + strconv.Itoa(i)
		snap, err = s.updateObject(ctx, schemas.ConfigKindAudience, "buyers", map[string]any{"name": name}, writeOptions{IfMatch: h}, nil)
		if err != nil {
			t.Fatalf("If-Match %s at version %d: %v", h, v, err)
		}
		if a, _ := snap.AudienceByID("buyers"); a.Name != name || snap.Revision(schemas.ConfigKindAudience, "buyers") <= v {
			t.Fatalf("If-Match %s: %+v at version %d, want %q after %d", h, a, snap.Revision(schemas.ConfigKindAudience, "buyers"), name, v)
		}
	}
	stale := strconv.FormatInt(snap.Revision(schemas.ConfigKindAudience, "buyers")-1, 10)
	_, err = s.updateObject(ctx, schemas.ConfigKindAudience, "buyers", map[string]any{"name": "Stale"}, writeOptions{IfMatch: stale}, nil)
	wantError(t, "a stale version", err, http.StatusConflict, codeVersion)
	err = s.removeObject(ctx, schemas.ConfigKindAudience, "buyers", writeOptions{IfMatch: stale})
	wantError(t, "a stale version's delete", err, http.StatusConflict, codeVersion)
	if a, ok := s.deps.Store.Snapshot().AudienceByID("buyers"); !ok || a.Name == "Stale" {
		t.Fatalf("a stale write was written: %+v, %v", a, ok)
	}
}

// TestWriteMergePatch: an update is an RFC 7396 merge patch of the stored object (a field left
// out is kept, null removes one, nested objects merge), except the parts that are one value: an
// audience's rule and a computed trait's computation are replaced whole. The id cannot change.
func TestWriteMergePatch(t *testing.T) {
	s := newWriteService(t)
	ctx := context.Background()
	_, err := s.createJSON(ctx, schemas.ConfigKindAudience, []byte(`{"id":"buyers","name":"Buyers","source":"web","realtime":true,
		"rule":{"event":"Order Completed","atLeast":2,"within":"720h"}}`))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.updateObject(ctx, schemas.ConfigKindAudience, "buyers", map[string]any{"name": "Big buyers", "realtime": nil,
		"rule": map[string]any{"trait": "plan", "equals": "pro"}}, writeOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := snap.AudienceByID("buyers")
	if a.Name != "Big buyers" || a.Source != "web" || a.Realtime {
		t.Fatalf("merged audience: %+v", a)
	}
	if a.Rule.Trait != "plan" || a.Rule.Event != "" || a.Rule.Within != 0 || a.Rule.MinCount() > 1 {
		t.Fatalf("the rule is not replaced whole: %+v", a.Rule)
	}
	_, err = s.updateObject(ctx, schemas.ConfigKindAudience, "buyers", map[string]any{"id": "sellers"}, writeOptions{}, nil)
	if ae := wantError(t, "a new id", err, http.StatusBadRequest, codeInvalid); ae.Field != "id" {
		t.Fatalf("a new id: field %q", ae.Field)
	}

	// A computed trait's computation: giving another removes the one it had.
	if _, err := s.createJSON(ctx, schemas.ConfigKindComputedTrait, []byte(`{"id":"orders","name":"Orders","source":"web","count":{"event":"Order Completed"}}`)); err != nil {
		t.Fatal(err)
	}
	snap, err = s.updateObject(ctx, schemas.ConfigKindComputedTrait, "orders", map[string]any{"sum": map[string]any{"event": "Order Completed", "property": "total"}}, writeOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := snap.ComputedTraitByID("orders")
	if kind, body := tr.Aggregate(); kind != schemas.AggSum || body.Property != "total" || tr.Count != nil {
		t.Fatalf("computation after the patch: %s %+v (count %+v)", kind, body, tr.Count)
	}

	// A destination's settings merge: a header left out of the patch is kept, as is the secret.
	if _, err := s.createJSON(ctx, schemas.ConfigKindDestination, []byte(`{"id":"hooks","type":"webhooks","name":"Hooks","sources":["web"],
		"settings":{"sharedSecret":"s3cret-never-shown-0123","webhooks":[{"url":"https://a.example.com/x"}]}}`)); err != nil {
		t.Fatal(err)
	}
	snap, err = s.updateObject(ctx, schemas.ConfigKindDestination, "hooks", map[string]any{"settings": map[string]any{"standardWebhooks": true}}, writeOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := snap.DestinationByID("hooks"); !d.Settings.StandardWebhooks || d.Settings.SharedSecret != "s3cret-never-shown-0123" || len(d.Settings.Webhooks) != 1 {
		t.Fatalf("merged destination settings: %+v", d.Settings)
	}
}

// TestWriteRemove: removing a missing object is 404 not_found; an object another needs is 409
// in_use naming it; a removed object is gone from the snapshot.
func TestWriteRemove(t *testing.T) {
	s := newWriteService(t)
	ctx := context.Background()
	for _, kind := range []schemas.ConfigKind{schemas.ConfigKindSource, schemas.ConfigKindDestination, schemas.ConfigKindAudience, schemas.ConfigKindComputedTrait} {
		err := s.removeObject(ctx, kind, "missing", writeOptions{})
		wantError(t, "removing a missing "+string(kind), err, http.StatusNotFound, codeNotFound)
		_, err = s.updateObject(ctx, kind, "missing", map[string]any{"name": "x"}, writeOptions{}, nil)
		wantError(t, "updating a missing "+string(kind), err, http.StatusNotFound, codeNotFound)
	}
	if _, err := s.createObject(ctx, buyers()); err != nil {
		t.Fatal(err)
	}
	err := s.removeObject(ctx, schemas.ConfigKindSource, "web", writeOptions{TakeOver: true})
	wantError(t, "removing a source in use", err, http.StatusConflict, codeInUse)
	if err := s.removeObject(ctx, schemas.ConfigKindAudience, "buyers", writeOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.deps.Store.Snapshot().AudienceByID("buyers"); ok {
		t.Fatal("a removed audience is still in the store")
	}
}

// TestWriteManagedByFile: an object a config file manages is refused with 409 managed_by_file
// unless the write takes it over; it is then the console's.
func TestWriteManagedByFile(t *testing.T) {
	s := newWriteService(t)
	ctx := context.Background()
	_, err := s.updateObject(ctx, schemas.ConfigKindDestination, "file-hooks", map[string]any{"name": "Mine"}, writeOptions{}, nil)
	wantError(t, "a file's destination", err, http.StatusConflict, codeManagedByFile)
	err = s.removeObject(ctx, schemas.ConfigKindDestination, "file-hooks", writeOptions{})
	wantError(t, "deleting a file's destination", err, http.StatusConflict, codeManagedByFile)
	snap, err := s.updateObject(ctx, schemas.ConfigKindDestination, "file-hooks", map[string]any{"name": "Mine"}, writeOptions{TakeOver: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := snap.DestinationByID("file-hooks"); d.Name != "Mine" || d.Origin != schemas.OriginConsole {
		t.Fatalf("taken over: %+v", d)
	}
}

// TestWriteSourceKeysAndConnections: a new source gets a fresh write key (one brought is
// refused); a rotation replaces it, keeping the old one's hash until the overlap ends (none
// with an overlap of 0, an overlap out of range refused); connecting and disconnecting a
// source are idempotent.
func TestWriteSourceKeysAndConnections(t *testing.T) {
	s := newWriteService(t)
	ctx := context.Background()
	app := func() schemas.ConfigObject {
		return schemas.ConfigObject{Kind: schemas.ConfigKindSource, ID: "app", Source: &schemas.Source{ID: "app", Name: "App"}}
	}
	brought := app()
	brought.Source.WriteKey = "wk_mine_0123456789"
	_, _, err := s.newSource(ctx, brought)
	if ae := wantError(t, "a write key brought", err, http.StatusBadRequest, codeInvalid); ae.Field != "writeKey" {
		t.Fatalf("a write key brought: field %q", ae.Field)
	}
	snap, key, err := s.newSource(ctx, app())
	if err != nil {
		t.Fatal(err)
	}
	src, _ := snap.SourceByID("app")
	if len(key) != len("wk_")+32 || src.KeyHash() != schemas.HashWriteKey(key) || src.WriteKey != "" {
		t.Fatalf("new source %+v, key %q", src, key)
	}

	_, _, _, err = s.rotateWriteKey(ctx, "app", s.cfg.MaxKeyOverlap+time.Hour, writeOptions{})
	wantError(t, "an overlap too long", err, http.StatusBadRequest, codeInvalid)
	snap, key2, expires, err := s.rotateWriteKey(ctx, "app", time.Hour, writeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src, _ = snap.SourceByID("app")
	if key2 == key || src.KeyHash() != schemas.HashWriteKey(key2) || src.PreviousWriteKeyHash != schemas.HashWriteKey(key) || src.PreviousWriteKeyExpiresAt != expires || expires == "" {
		t.Fatalf("rotated with an overlap: %+v, expires %q", src, expires)
	}
	snap, key3, expires, err := s.rotateWriteKey(ctx, "app", 0, writeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src, _ = snap.SourceByID("app")
	if src.KeyHash() != schemas.HashWriteKey(key3) || src.PreviousWriteKeyHash != "" || src.PreviousWriteKeyExpiresAt != "" || expires != "" {
		t.Fatalf("rotated without an overlap: %+v, expires %q", src, expires)
	}

	if _, err := s.createJSON(ctx, schemas.ConfigKindDestination, []byte(`{"id":"hooks","type":"webhooks","name":"Hooks","sources":["web"],
		"settings":{"webhooks":[{"url":"https://a.example.com/x"}]}}`)); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		src       string
		connected bool
		want      []string
	}{
		{"app", true, []string{"web", "app"}},
		{"app", true, []string{"web", "app"}},
		{"web", false, []string{"app"}},
		{"web", false, []string{"app"}},
	} {
		snap, err := s.setSourceConnected(ctx, "hooks", step.src, step.connected, writeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d, _ := snap.DestinationByID("hooks"); !slices.Equal(d.Sources, step.want) {
			t.Fatalf("%s connected %v: sources %v, want %v", step.src, step.connected, d.Sources, step.want)
		}
	}
	_, err = s.setSourceConnected(ctx, "hooks", "ghost", true, writeOptions{})
	wantError(t, "connecting a missing source", err, http.StatusBadRequest, codeInvalid)
}
