package console

import (
	"context"
	"crypto/hmac"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// A destination's secrets are write-only in the console (docs/console.md#secrets): the shared
// secrets (answered as hasSharedSecret), every static header value and the credentials of a
// webhook URL (user info, query values). The API and the pages show header values with
// schemas.MaskSecret ("Bearer ••••88") and URLs with schemas.MaskURL; a write that sends such a
// masked value back keeps the stored secret (unmaskSecrets), so a client may PATCH what it read.
// The export names them by reference (secretRef), which PUT /v1/config resolves (keepSecrets).

// maskWebhooks masks the header values and URL credentials of a destination's settings as
// objectJSON gives them (webhooks in the order of d's).
func maskWebhooks(settings map[string]any, d *schemas.Destination) {
	whs, _ := settings["webhooks"].([]any)
	for i, w := range whs {
		wm, ok := w.(map[string]any)
		if !ok || i >= len(d.Settings.Webhooks) {
			continue
		}
		wm["url"] = schemas.MaskURL(d.Settings.Webhooks[i].URL)
		if hs, ok := wm["headers"].(map[string]any); ok {
			for name := range hs {
				hs[name] = schemas.MaskSecret(d.Settings.Webhooks[i].Headers[name])
			}
		}
	}
}

// maskedError is the 400 of a masked value that is no stored value's mask.
func maskedError(path, what string) error {
	return errInvalid(path, "%s: is masked (%s) but is not the mask of %s of this destination: give the value itself", path, schemas.Mask, what)
}

// candidates are the webhooks of cur, webhook i first: where a masked value of next's webhook i
// is looked up (a client that reorders the webhooks keeps their secrets).
func candidates(cur *schemas.Destination, i int) []schemas.Webhook {
	if cur == nil {
		return nil
	}
	out := make([]schemas.Webhook, 0, len(cur.Settings.Webhooks))
	if i < len(cur.Settings.Webhooks) {
		out = append(out, cur.Settings.Webhooks[i])
	}
	for j, wh := range cur.Settings.Webhooks {
		if j != i {
			out = append(out, wh)
		}
	}
	return out
}

// unmaskSecrets replaces, in next (a destination written through the API or a page), every
// masked header value and URL by the stored secret it is the mask of, in cur (nil for a new
// destination): a header value by the value of a header of the same name (any case) whose
// schemas.MaskSecret it is, a URL by a URL whose schemas.MaskURL it is, webhook i of cur tried
// first. A masked value that matches none is a 400 naming the field (after prefix, "" for an
// object of the API, "destinations[3]." in a config file): the console never stores a mask.
func unmaskSecrets(cur, next *schemas.Destination, prefix string) error {
	for i := range next.Settings.Webhooks {
		wh := &next.Settings.Webhooks[i]
		cands := candidates(cur, i)
		if schemas.IsMasked(wh.URL) {
			found := false
			for _, c := range cands {
				if schemas.MaskURL(c.URL) == wh.URL {
					wh.URL, found = c.URL, true
					break
				}
			}
			if !found {
				return maskedError(fmt.Sprintf("%ssettings.webhooks[%d].url", prefix, i), "a URL")
			}
		}
		for name, v := range wh.Headers {
			if !schemas.IsMasked(v) {
				continue
			}
			found := false
			for _, c := range cands {
				for cn, cv := range c.Headers {
					if !found && strings.EqualFold(cn, name) && schemas.MaskSecret(cv) == v {
						wh.Headers[name], found = cv, true
					}
				}
			}
			if !found {
				return maskedError(fmt.Sprintf("%ssettings.webhooks[%d].headers[%q]", prefix, i, name), "a value of header "+name)
			}
		}
	}
	return nil
}

// isRef reports whether v is an export's reference to a secret (secretRef's form).
func isRef(v string) bool {
	return strings.HasPrefix(v, secretRefPrefix) && len(v) == len(secretRefPrefix)+64
}

// resolve returns the secret among secrets whose reference ref is.
func (s *Service) resolve(ref string, secrets []string) (string, bool) {
	for _, secret := range secrets {
		if secret != "" && hmac.Equal([]byte(s.secretRef(secret)), []byte(ref)) {
			return secret, true
		}
	}
	return "", false
}

// unknownRef is the 400 of a reference that names no secret of the destination.
func unknownRef(path string) error {
	return &apiError{Status: http.StatusBadRequest, Code: codeInvalid, Field: path,
		Message: path + ": refers to a secret this destination does not have (an export from another install, or from before CONSOLE_TOKEN changed?): give the secret itself"}
}

// keepSecrets replaces, in a config file's destinations, every reference of an export
// (secretRef) by the current secret it names: a shared secret by the destination's shared or
// previous shared secret, a URL by one of its URLs, a header value by a value of a header of
// that name. A reference that names no current secret of that destination is a 400. Masked
// values (an API answer pasted into the file) are treated as in a PATCH (unmaskSecrets).
func (s *Service) keepSecrets(cfg *schemas.Config, cur func(id string) *schemas.Destination) error {
	for i := range cfg.Destinations {
		d := &cfg.Destinations[i]
		c := cur(d.ID)
		if c == nil {
			c = &schemas.Destination{}
		}
		if err := unmaskSecrets(c, d, fmt.Sprintf("destinations[%d].", i)); err != nil {
			return err
		}
		base := fmt.Sprintf("destinations[%d].settings.", i)
		for _, f := range []struct {
			name string
			v    *string
		}{{"sharedSecret", &d.Settings.SharedSecret}, {"previousSharedSecret", &d.Settings.PreviousSharedSecret}} {
			if !isRef(*f.v) {
				continue
			}
			secret, ok := s.resolve(*f.v, []string{c.Settings.SharedSecret, c.Settings.PreviousSharedSecret})
			if !ok {
				return unknownRef(base + f.name)
			}
			*f.v = secret
		}
		var urls []string
		headers := map[string][]string{} // lower-case name → values
		for _, wh := range c.Settings.Webhooks {
			urls = append(urls, wh.URL)
			for name, v := range wh.Headers {
				headers[strings.ToLower(name)] = append(headers[strings.ToLower(name)], v)
			}
		}
		for j := range d.Settings.Webhooks {
			wh := &d.Settings.Webhooks[j]
			if isRef(wh.URL) {
				u, ok := s.resolve(wh.URL, urls)
				if !ok {
					return unknownRef(fmt.Sprintf("%swebhooks[%d].url", base, j))
				}
				wh.URL = u
			}
			for name, v := range wh.Headers {
				if !isRef(v) {
					continue
				}
				secret, ok := s.resolve(v, headers[strings.ToLower(name)])
				if !ok {
					return unknownRef(fmt.Sprintf("%swebhooks[%d].headers[%q]", base, j, name))
				}
				wh.Headers[name] = secret
			}
		}
	}
	return nil
}

// exportSecrets replaces d's secrets by their references, as the export gives them; comments
// gets, for each URL reference, the URL redacted (schemas.RedactURL), to write beside it.
func (s *Service) exportSecrets(d *schemas.Destination, comments map[string]string) {
	st := &d.Settings
	if st.SharedSecret != "" {
		st.SharedSecret = s.secretRef(st.SharedSecret)
	}
	if st.PreviousSharedSecret != "" {
		st.PreviousSharedSecret = s.secretRef(st.PreviousSharedSecret)
	}
	st.Webhooks = slices.Clone(st.Webhooks) // d is a copy; its webhooks are still the store's
	for i := range st.Webhooks {
		wh := &st.Webhooks[i]
		if schemas.URLHasCredentials(wh.URL) {
			ref := s.secretRef(wh.URL)
			comments[ref] = schemas.RedactURL(wh.URL)
			wh.URL = ref
		}
		if len(wh.Headers) > 0 {
			hs := make(map[string]string, len(wh.Headers))
			for name, v := range wh.Headers {
				hs[name] = s.secretRef(v)
			}
			wh.Headers = hs
		}
	}
}

// reencryptResult is the answer of POST /v1/config/reencrypt.
type reencryptResult struct {
	// KeyID is the key the secrets are now encrypted with: the first of CONFIG_ENCRYPTION_KEY.
	KeyID string `json:"keyId"`
	// Reencrypted are the keys of the objects written again ("destination/crm").
	Reencrypted []string `json:"reencrypted"`
}

// reencryptObjects writes again, with the first key of CONFIG_ENCRYPTION_KEY, every object
// whose record holds a secret in clear or under another key (platform.Snapshot.NeedsSealing),
// whatever its origin: each keeps its origin and content
// (docs/configuration.md#secrets-at-rest). Without a key it is a 409.
func (s *Service) reencryptObjects(ctx context.Context) (reencryptResult, error) {
	ctx = withAuditAction(ctx, actionReencrypt)
	if s.keys == nil {
		return reencryptResult{}, &apiError{Status: http.StatusConflict, Code: codeConflict,
			Message: "CONFIG_ENCRYPTION_KEY is not set for the console: set it in every service first (docs/configuration.md#secrets-at-rest)"}
	}
	var res reencryptResult
	var objs []schemas.ConfigObject
	err := s.configTx(ctx, func(snap *platform.Snapshot) error {
		res = reencryptResult{KeyID: s.keys.KeyIDs()[0], Reencrypted: []string{}}
		objs = nil
		for _, o := range objectsOf(snap) {
			if snap.NeedsSealing(o.Kind, o.ID) {
				objs = append(objs, o)
				res.Reencrypted = append(res.Reencrypted, o.Key())
			}
		}
		if len(objs) > 0 {
			if _, err := s.writeObjects(ctx, objs...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return reencryptResult{}, err
	}
	s.logger.Info().Str("key_id", res.KeyID).Int("objects", len(objs)).Msg("config re-encrypted")
	return res, nil
}

// reencryptConfig is POST /v1/config/reencrypt.
func (s *Service) reencryptConfig(w http.ResponseWriter, r *http.Request) error {
	res, err := s.reencryptObjects(r.Context())
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, res)
	return nil
}
