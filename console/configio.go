package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// GET /v1/config exports the whole config as a config file (docs/configuration.md), for Git;
// PUT /v1/config applies such a file. Write keys are exported as writeKeyHash (the form at rest);
// a destination's other secrets — shared secrets, static header values, URLs with credentials
// (the URL redacted in a comment beside it) — as "hmac-sha256:<hex>", an HMAC under a key
// derived from the console token (secretRef): not a plain hash, which a weak secret in a Git
// repository would give away to a dictionary. Applying the file back keeps a secret whose
// reference it gives (keepSecrets, secrets.go).

// secretRefPrefix starts the export's reference to a shared secret.
const secretRefPrefix = "hmac-sha256:"

// secretRef is the export's reference to a shared secret: an HMAC-SHA256 of the secret under a
// key derived from the console token (a new token makes old exports' references unknown: give
// the secrets themselves then).
func (s *Service) secretRef(secret string) string {
	k := hmac.New(sha256.New, []byte(s.cfg.Token))
	k.Write([]byte("tributary-config-export-v1"))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write([]byte(secret))
	return secretRefPrefix + hex.EncodeToString(m.Sum(nil))
}

// exportedConfig is the config of snap, as a file would hold it: no origins, write keys as
// their hashes, a destination's secrets as references; comments maps a URL's reference to the
// URL redacted (configYAML writes it beside the reference).
func (s *Service) exportedConfig(snap *platform.Snapshot, now time.Time) (cfg *schemas.Config, comments map[string]string) {
	cfg = configOf(snap, schemas.ConfigObject{})
	comments = map[string]string{}
	for i := range cfg.Sources {
		src := &cfg.Sources[i]
		src.WriteKeyHash, src.WriteKey, src.Origin = src.KeyHash(), "", ""
		if p, err := schemas.ParseTimestamp(src.PreviousWriteKeyExpiresAt); err != nil || !p.After(now) {
			src.PreviousWriteKeyHash, src.PreviousWriteKeyExpiresAt = "", "" // expired: gone
		}
	}
	for i := range cfg.Destinations {
		d := &cfg.Destinations[i]
		d.Origin = ""
		if d.Sources == nil {
			d.Sources = []string{}
		}
		s.exportSecrets(d, comments)
	}
	for i := range cfg.Audiences {
		cfg.Audiences[i].Origin = ""
	}
	for i := range cfg.ComputedTraits {
		cfg.ComputedTraits[i].Origin = ""
	}
	for i := range cfg.TrackingPlans {
		cfg.TrackingPlans[i].Origin = ""
	}
	if cfg.Console != nil {
		for i := range cfg.Console.Users {
			cfg.Console.Users[i].Origin = ""
		}
	}
	if cfg.Identity != nil {
		cfg.Identity.Origin = ""
	}
	return cfg, comments
}

// configYAML writes cfg as YAML with the field names and order of its JSON form, comment at
// its head, and lineComments[v] beside every scalar v.
func configYAML(cfg *schemas.Config, comment string, lineComments map[string]string) ([]byte, error) {
	j, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(j, &doc); err != nil {
		return nil, err
	}
	var block func(n *yaml.Node)
	block = func(n *yaml.Node) {
		n.Style = 0 // block style and plain scalars where YAML allows them
		if c, ok := lineComments[n.Value]; ok && n.Kind == yaml.ScalarNode {
			n.LineComment = c
		}
		for _, c := range n.Content {
			block(c)
		}
	}
	block(&doc)
	doc.HeadComment = comment
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// exportYAML is the current config as a config file (GET /v1/config and the settings page's
// download): secrets as references, never in the clear.
func (s *Service) exportYAML() ([]byte, error) {
	snap := s.deps.Store.Snapshot()
	cfg, comments := s.exportedConfig(snap, s.now())
	return configYAML(cfg,
		"Tributary config exported by the console at "+schemas.FormatTimestamp(s.now())+".\n"+
			"Write keys are their hashes; shared secrets, header values and URLs with credentials references (hmac-sha256:);\n"+
			"applying it with PUT /v1/config keeps the secret a reference names.", comments)
}

func (s *Service) exportConfig(w http.ResponseWriter, _ *http.Request) error {
	out, err := s.exportYAML()
	if err != nil {
		return err
	}
	return downloadYAML(w, out)
}

// downloadYAML answers an exported config file as a download.
func downloadYAML(w http.ResponseWriter, out []byte) error {
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Content-Disposition", `attachment; filename="tributary.yaml"`)
	w.Header().Set("Cache-Control", "no-store")
	_, err := w.Write(out)
	return err
}

// change is one change PUT /v1/config makes (or, with dryRun, would make).
type change struct {
	Key    string   `json:"key"`
	Action string   `json:"action"` // create, update, delete
	Fields []string `json:"fields,omitempty"`
}

// fileErrors is the 400 of a config file's problems: each with its line.
func fileErrors(err error) error {
	var errs schemas.ConfigErrors
	if !errors.As(err, &errs) || len(errs) == 0 {
		return errInvalid("", "%v", err)
	}
	ae := &apiError{Status: http.StatusBadRequest, Code: codeInvalid, Field: errs[0].Path, Message: errs[0].Error()}
	if len(errs) > 1 {
		for _, e := range errs {
			ae.Errors = append(ae.Errors, fieldError{Field: e.Path, Message: e.Error()})
		}
	}
	return ae
}

func (s *Service) importConfig(w http.ResponseWriter, r *http.Request) error {
	body, err := readBodyLimit(w, r, maxImportBody)
	if err != nil {
		return err
	}
	format := schemas.ConfigFormatYAML
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" {
		format = schemas.ConfigFormatJSON
	}
	q := r.URL.Query()
	dryRun, takeOver := q.Get("dryRun") == "true", q.Get("takeOver") == "true"
	changes, err := s.applyConfig(r.Context(), body, format, dryRun, takeOver)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, map[string]any{"dryRun": dryRun, "changes": changes})
	return nil
}

// applyConfig applies a config file (PUT /v1/config, the settings page's import): the file is
// the whole of what the console manages, so the objects it no longer lists are deleted; an
// object a config file manages changes only with takeOver. It returns the changes, in the
// order they are written; with dryRun it writes nothing.
func (s *Service) applyConfig(ctx context.Context, body []byte, format string, dryRun, takeOver bool) ([]change, error) {
	ctx = withAuditAction(ctx, actionImport)
	if _, err := schemas.ParseConfig(body, format); err != nil {
		return nil, fileErrors(err) // before taking the config writers' transactional id
	}
	if dryRun {
		return s.applyConfigIn(ctx, s.deps.Store.Snapshot(), body, format, true, takeOver)
	}
	var changes []change
	err := s.configTx(ctx, func(snap *platform.Snapshot) (err error) {
		changes, err = s.applyConfigIn(ctx, snap, body, format, false, takeOver)
		return err
	})
	return changes, err
}

// applyConfigIn is applyConfig's check and write against snap (configTx's).
func (s *Service) applyConfigIn(ctx context.Context, snap *platform.Snapshot, body []byte, format string, dryRun, takeOver bool) ([]change, error) {
	cfg, err := schemas.ParseConfig(body, format)
	if err != nil {
		return nil, fileErrors(err)
	}
	if err := s.keepSecrets(cfg, func(id string) *schemas.Destination { d, _ := snap.DestinationByID(id); return d }); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, fileErrors(err)
	}
	for i := range cfg.Sources {
		cfg.Sources[i].Origin = schemas.OriginConsole
	}
	for i := range cfg.Destinations {
		cfg.Destinations[i].Origin = schemas.OriginConsole
	}
	for i := range cfg.Audiences {
		cfg.Audiences[i].Origin = schemas.OriginConsole
	}
	for i := range cfg.ComputedTraits {
		cfg.ComputedTraits[i].Origin = schemas.OriginConsole
	}
	for i := range cfg.TrackingPlans {
		cfg.TrackingPlans[i].Origin = schemas.OriginConsole
	}
	if cfg.Console != nil {
		for i := range cfg.Console.Users {
			cfg.Console.Users[i].Origin = schemas.OriginConsole
		}
	}
	if cfg.Identity != nil {
		cfg.Identity.Origin = schemas.OriginConsole
	}
	recs, err := cfg.Records()
	if err != nil {
		return nil, fileErrors(err)
	}
	listed := map[string]bool{}
	var changes []change
	var writes []schemas.ConfigObject
	var conflicts []fieldError
	for _, rec := range recs {
		listed[rec.Key] = true
		next, err := schemas.DecodeConfigRecord(rec.Key, rec.Value)
		if err != nil {
			return nil, err
		}
		cur, exists := lookup(snap, next.Kind, next.ID)
		fields := schemas.ConfigChanges(cur, next)
		byFile := exists && strings.HasPrefix(cur.Origin(), schemas.OriginFilePrefix)
		fields = slices.DeleteFunc(fields, func(f string) bool { return f == "origin" })
		switch {
		case !exists:
			changes = append(changes, change{Key: rec.Key, Action: "create"})
		case len(fields) == 0 && !byFile && snap.NeedsSealing(next.Kind, next.ID):
			// Unchanged, but its secrets are in clear or under an older key: written again
			// (docs/configuration.md#secrets-at-rest).
			changes = append(changes, change{Key: rec.Key, Action: "update", Fields: []string{"secrets encrypted with key " + s.keys.KeyIDs()[0]}})
		case len(fields) == 0:
			continue // unchanged (a file's object stays the file's)
		case byFile && !takeOver:
			conflicts = append(conflicts, fieldError{Field: rec.Key, Message: fmt.Sprintf("%s is managed by %s and the file changes it (%s): change it there, or add ?takeOver=true", rec.Key, cur.Origin(), strings.Join(fields, ", "))})
			continue
		default:
			changes = append(changes, change{Key: rec.Key, Action: "update", Fields: fields})
		}
		writes = append(writes, next) // as decoded from its record: write keys hashed

	}
	if len(conflicts) > 0 {
		return nil, &apiError{Status: http.StatusConflict, Code: codeManagedByFile, Message: conflicts[0].Message, Field: conflicts[0].Field, Errors: conflicts}
	}
	// Objects the console manages that the file no longer lists are deleted: the file is the
	// whole of what the console manages (objects of config files stay).
	var deletes []schemas.ConfigObject
	result := &schemas.Config{Sources: cfg.Sources, Destinations: cfg.Destinations, Audiences: cfg.Audiences, ComputedTraits: cfg.ComputedTraits, TrackingPlans: cfg.TrackingPlans, Console: cfg.Console, Identity: cfg.Identity}
	for _, o := range objectsOf(snap) {
		switch {
		case listed[o.Key()]:
		case o.Origin() == schemas.OriginConsole:
			deletes = append(deletes, schemas.ConfigObject{Kind: o.Kind, ID: o.ID})
		default:
			addTo(result, o)
		}
	}
	if err := result.Validate(); err != nil {
		ae := fileErrors(err).(*apiError)
		ae.Status, ae.Code = http.StatusConflict, codeInUse
		ae.Message = "the config would not be valid with the objects config files manage: " + ae.Message
		return nil, ae
	}
	// Delete dependents first: computed traits, audiences, destinations, then sources.
	slices.Reverse(deletes)
	for _, d := range deletes {
		changes = append(changes, change{Key: d.Key(), Action: "delete"})
	}
	if changes == nil {
		changes = []change{}
	}
	if !dryRun && (len(writes) > 0 || len(deletes) > 0) {
		if _, err := s.writeObjects(ctx, append(writes, deletes...)...); err != nil {
			return nil, err
		}
	}
	return changes, nil
}
