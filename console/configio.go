package console

import (
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
// a shared secret as "hmac-sha256:<hex>", an HMAC under a key derived from the console token
// (secretRef): not a plain hash, which a weak secret in a Git repository would give away to a
// dictionary. Applying the file back keeps a secret whose reference it gives.

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
// their hashes, shared secrets as references.
func (s *Service) exportedConfig(snap *platform.Snapshot, now time.Time) *schemas.Config {
	cfg := configOf(snap, schemas.ConfigObject{})
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
		if d.Settings.SharedSecret != "" {
			d.Settings.SharedSecret = s.secretRef(d.Settings.SharedSecret)
		}
		if d.Settings.PreviousSharedSecret != "" {
			d.Settings.PreviousSharedSecret = s.secretRef(d.Settings.PreviousSharedSecret)
		}
	}
	for i := range cfg.Audiences {
		cfg.Audiences[i].Origin = ""
	}
	for i := range cfg.ComputedTraits {
		cfg.ComputedTraits[i].Origin = ""
	}
	return cfg
}

// configYAML writes cfg as YAML with the field names and order of its JSON form.
func configYAML(cfg *schemas.Config, comment string) ([]byte, error) {
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

func (s *Service) exportConfig(w http.ResponseWriter, _ *http.Request) error {
	snap := s.deps.Store.Snapshot()
	out, err := configYAML(s.exportedConfig(snap, s.now()),
		"Tributary config exported by the console at "+schemas.FormatTimestamp(s.now())+".\n"+
			"Write keys are their hashes, shared secrets references (hmac-sha256:): PUT /v1/config keeps the secret a reference names.")
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Content-Disposition", `attachment; filename="tributary.yaml"`)
	w.Header().Set("Cache-Control", "no-store")
	_, err = w.Write(out)
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

// keepSecrets replaces, in the file's destinations, a shared secret given as the hash of the
// current one by the current secret; a reference to another secret is an error.
func (s *Service) keepSecrets(cfg *schemas.Config, snap *platform.Snapshot) error {
	for i := range cfg.Destinations {
		d := &cfg.Destinations[i]
		var cur *schemas.Destination
		if c, ok := snap.DestinationByID(d.ID); ok {
			cur = c
		}
		for _, f := range []struct {
			name string
			v    *string
		}{{"sharedSecret", &d.Settings.SharedSecret}, {"previousSharedSecret", &d.Settings.PreviousSharedSecret}} {
			if !strings.HasPrefix(*f.v, secretRefPrefix) || len(*f.v) != len(secretRefPrefix)+64 {
				continue
			}
			matched := false
			if cur != nil {
				for _, secret := range []string{cur.Settings.SharedSecret, cur.Settings.PreviousSharedSecret} {
					if secret != "" && hmac.Equal([]byte(s.secretRef(secret)), []byte(*f.v)) {
						*f.v, matched = secret, true
						break
					}
				}
			}
			if !matched {
				path := fmt.Sprintf("destinations[%d].settings.%s", i, f.name)
				return &apiError{Status: http.StatusBadRequest, Code: codeInvalid, Field: path,
					Message: path + ": refers to a secret this destination does not have (an export from another install, or from before CONSOLE_TOKEN changed?): give the secret itself"}
			}
		}
	}
	return nil
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
	cfg, err := schemas.ParseConfig(body, format)
	if err != nil {
		return fileErrors(err)
	}
	q := r.URL.Query()
	dryRun, takeOver := q.Get("dryRun") == "true", q.Get("takeOver") == "true"

	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	snap := s.deps.Store.Snapshot()
	if err := s.keepSecrets(cfg, snap); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return fileErrors(err)
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
	recs, err := cfg.Records()
	if err != nil {
		return fileErrors(err)
	}
	listed := map[string]bool{}
	var changes []change
	var writes []schemas.ConfigObject
	var conflicts []fieldError
	for _, rec := range recs {
		listed[rec.Key] = true
		next, err := schemas.DecodeConfigRecord(rec.Key, rec.Value)
		if err != nil {
			return err
		}
		cur, exists := lookup(snap, next.Kind, next.ID)
		fields := schemas.ConfigChanges(cur, next)
		byFile := exists && strings.HasPrefix(cur.Origin(), schemas.OriginFilePrefix)
		fields = slices.DeleteFunc(fields, func(f string) bool { return f == "origin" })
		switch {
		case !exists:
			changes = append(changes, change{Key: rec.Key, Action: "create"})
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
		return &apiError{Status: http.StatusConflict, Code: codeManagedByFile, Message: conflicts[0].Message, Field: conflicts[0].Field, Errors: conflicts}
	}
	// Objects the console manages that the file no longer lists are deleted: the file is the
	// whole of what the console manages (objects of config files stay).
	var deletes []schemas.ConfigObject
	result := &schemas.Config{Sources: cfg.Sources, Destinations: cfg.Destinations, Audiences: cfg.Audiences, ComputedTraits: cfg.ComputedTraits}
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
		return ae
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
		if _, err := s.writeObjects(r.Context(), append(writes, deletes...)...); err != nil {
			return err
		}
	}
	writeData(w, http.StatusOK, map[string]any{"dryRun": dryRun, "changes": changes})
	return nil
}
