package schemas

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Validate checks every rule of docs/configuration.md over the whole config: each object's own
// rules (see Source.Validate, Destination.Validate, Audience.Validate), ids unique per kind,
// write keys unique across sources, destination and audience sources that exist, and audience
// names whose trait keys (SnakeCase) do not collide. It returns every problem at once as
// ConfigErrors, each naming the field path and, for a parsed config, the line.
func (c *Config) Validate() error {
	v := &validator{lines: c.lines}
	sourceIDs := map[string]string{} // id → path of its first use
	keys := map[string]string{}      // key hash → path of the source
	for i := range c.Sources {
		s := &c.Sources[i]
		p := indexPath("sources", i)
		s.check(v, p)
		v.unique(sourceIDs, s.ID, fieldPath(p, "id"))
		if h := s.KeyHash(); h != "" {
			kp := fieldPath(p, "writeKey")
			if s.WriteKey == "" {
				kp = fieldPath(p, "writeKeyHash")
			}
			if first, dup := keys[h]; dup {
				v.addf(kp, "same write key as %s", first)
			} else {
				keys[h] = p
			}
		}
	}
	destIDs := map[string]string{}
	for i := range c.Destinations {
		d := &c.Destinations[i]
		p := indexPath("destinations", i)
		d.check(v, p)
		v.unique(destIDs, d.ID, fieldPath(p, "id"))
		for j, src := range d.Sources {
			if _, ok := sourceIDs[src]; !ok && src != "" {
				v.addf(indexPath(fieldPath(p, "sources"), j), "unknown source %q", src)
			}
		}
	}
	c.validateAudiences(v, sourceIDs)
	c.validatePlans(v, sourceIDs)
	c.validateConsole(v)
	if c.Identity != nil {
		c.Identity.check(v, "identity")
	}
	// Report in the order of the text; a config built in code keeps the order of the checks.
	slices.SortStableFunc(v.errs, func(a, b *ConfigError) int { return a.Line - b.Line })
	return v.errs.errOrNil()
}

// Validate checks the source's own rules (those that need no other object); its errors'
// paths are relative to the source ("writeKeyHash").
func (s *Source) Validate() error {
	v := &validator{}
	s.check(v, "")
	return v.errs.errOrNil()
}

// Validate checks the destination's own rules (those that need no other object; that its
// sources exist is Config.Validate's job); error paths are relative to the destination.
func (d *Destination) Validate() error {
	v := &validator{}
	d.check(v, "")
	return v.errs.errOrNil()
}

// Validate checks the audience's own rules (those that need no other object; that its source
// exists and its trait key is unique is Config.Validate's job); error paths are relative to
// the audience.
func (a *Audience) Validate() error {
	v := &validator{}
	a.check(v, "")
	return v.errs.errOrNil()
}

// validator collects problems; lines (may be nil) locates paths.
type validator struct {
	lines map[string]int
	errs  ConfigErrors
}

func (v *validator) addf(path, format string, args ...any) {
	v.errs = append(v.errs, &ConfigError{Line: lineOf(v.lines, path), Path: path, Message: fmt.Sprintf(format, args...)})
}

// set reports whether path was written in the parsed text (even with a zero value).
func (v *validator) set(path string) bool {
	_, ok := v.lines[path]
	return ok
}

// unique reports a second use of id among seen (id → path of its first use).
func (v *validator) unique(seen map[string]string, id, path string) {
	if id == "" {
		return
	}
	if first, dup := seen[id]; dup {
		v.addf(path, "duplicate id %q (first used by %s)", id, strings.TrimSuffix(first, ".id"))
		return
	}
	seen[id] = path
}

// validID reports whether id is non-empty and only [a-z0-9_-].
func validID(id string) bool {
	if id == "" {
		return false
	}
	for _, c := range []byte(id) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

func (v *validator) id(path, id string) {
	switch {
	case id == "":
		v.addf(path, "is required")
	case !validID(id):
		v.addf(path, "%q must contain only a-z, 0-9, '-' and '_'", id)
	}
}

func (s *Source) check(v *validator, p string) {
	v.id(fieldPath(p, "id"), s.ID)
	switch {
	case s.WriteKey == "" && s.WriteKeyHash == "":
		v.addf(p, "one of writeKey or writeKeyHash is required")
	case s.WriteKey != "" && s.WriteKeyHash != "":
		v.addf(fieldPath(p, "writeKeyHash"), "give writeKey or writeKeyHash, not both")
	case s.WriteKey != "" && !validWriteKey(s.WriteKey):
		// Never echo the key: it is a secret.
		v.addf(fieldPath(p, "writeKey"), "must be printable ASCII without spaces or ':'")
	case s.WriteKeyHash != "" && !validWriteKeyHash(s.WriteKeyHash):
		v.addf(fieldPath(p, "writeKeyHash"), "must be \"sha256:\" followed by 64 lower-case hex digits")
	}
	switch {
	case s.PreviousWriteKeyHash == "" && s.PreviousWriteKeyExpiresAt == "":
	case s.PreviousWriteKeyHash == "":
		v.addf(fieldPath(p, "previousWriteKeyHash"), "is required with previousWriteKeyExpiresAt")
	case s.PreviousWriteKeyExpiresAt == "":
		v.addf(fieldPath(p, "previousWriteKeyExpiresAt"), "is required with previousWriteKeyHash")
	case !validWriteKeyHash(s.PreviousWriteKeyHash):
		v.addf(fieldPath(p, "previousWriteKeyHash"), "must be \"sha256:\" followed by 64 lower-case hex digits")
	default:
		if _, err := ParseTimestamp(s.PreviousWriteKeyExpiresAt); err != nil {
			v.addf(fieldPath(p, "previousWriteKeyExpiresAt"), "must be an ISO-8601 timestamp")
		}
	}
	if s.TrackingPlan != nil {
		bp := fieldPath(fieldPath(p, "trackingPlan"), "blockedEvents")
		for i, e := range s.TrackingPlan.BlockedEvents {
			if e == "" {
				v.addf(indexPath(bp, i), "must not be empty")
			}
		}
		s.TrackingPlan.checkPlan(v, fieldPath(p, "trackingPlan"))
	}
}

// reservedHeader reports whether name (any case) is a request header Tributary sets itself
// on every delivery, which a webhook entry therefore may not configure: Content-Type,
// Content-Length and Host describe the body and the connection and are computed by the HTTP
// client; User-Agent identifies Tributary; X-Signature, X-Message-Id and the Standard Webhooks
// headers (webhook-id, webhook-timestamp, webhook-signature) carry the signature and the
// de-duplication id that receivers rely on, which a static value would break or forge.
func reservedHeader(name string) bool {
	switch strings.ToLower(name) {
	case "content-type", "content-length", "host", "user-agent", "x-signature", "x-message-id",
		"webhook-id", "webhook-timestamp", "webhook-signature":
		return true
	}
	return false
}

// encryptedInConfig refuses a secret that looks encrypted: on tributary.config that prefix
// marks a value to decrypt (secretbox.go), so a plain secret may not start with it.
const encryptedInConfig = "must not start with \"" + EncryptedPrefix + "\", which marks an encrypted value in tributary.config (give the secret in clear: it is encrypted where it rests when CONFIG_ENCRYPTION_KEY is set)"

func (d *Destination) check(v *validator, p string) {
	v.id(fieldPath(p, "id"), d.ID)
	if d.Type != DestinationTypeWebhooks {
		v.addf(fieldPath(p, "type"), "must be %q, got %q", DestinationTypeWebhooks, d.Type)
	}
	seen := map[string]bool{}
	for i, src := range d.Sources {
		sp := indexPath(fieldPath(p, "sources"), i)
		switch {
		case src == "":
			v.addf(sp, "is empty: want a source id")
		case seen[src]:
			v.addf(sp, "source %q is listed twice", src)
		}
		seen[src] = true
	}
	d.checkFilters(v, p)
	sp := fieldPath(p, "settings")
	st := &d.Settings
	wp := fieldPath(sp, "webhooks")
	switch n := len(st.Webhooks); {
	case n == 0:
		v.addf(wp, "at least 1 webhook is required")
	case n > MaxWebhooks:
		// Named at the first entry too many, where the fix starts.
		v.addf(indexPath(wp, MaxWebhooks), "at most %d webhooks are allowed, got %d", MaxWebhooks, n)
	}
	for i := range st.Webhooks {
		st.Webhooks[i].check(v, indexPath(wp, i))
	}
	for _, f := range [...]struct{ name, value string }{{"sharedSecret", st.SharedSecret}, {"previousSharedSecret", st.PreviousSharedSecret}} {
		if strings.HasPrefix(f.value, EncryptedPrefix) {
			v.addf(fieldPath(sp, f.name), "%s", encryptedInConfig)
		}
	}
	if st.SharedSecret == "" {
		if st.StandardWebhooks {
			v.addf(fieldPath(sp, "standardWebhooks"), "requires sharedSecret")
		}
		if st.PreviousSharedSecret != "" {
			v.addf(fieldPath(sp, "previousSharedSecret"), "requires sharedSecret")
		}
	}
	if r := st.MaxRequestsPerSecond; r < 0 || !finite(r) {
		v.addf(fieldPath(sp, "maxRequestsPerSecond"), "must be a number ≥ 0 (0: no limit), got %v", r)
	}
	if c := st.MaxConcurrency; c < 0 {
		v.addf(fieldPath(sp, "maxConcurrency"), "must be a whole number ≥ 0 (0: the adaptive limit alone), got %d", c)
	}
	if o := st.Ordering; o != "" && o != OrderingPerUser {
		v.addf(fieldPath(sp, "ordering"), "must be %q or omitted (no ordering), got %q", OrderingPerUser, o)
	}
	if a := st.AutoDisable; a != nil && time.Duration(a.After) < time.Second {
		v.addf(fieldPath(fieldPath(sp, "autoDisable"), "after"), "must be a duration of at least 1s (e.g. 72h), got %q", ShortDuration(time.Duration(a.After)))
	}
}

func (w *Webhook) check(v *validator, p string) {
	up := fieldPath(p, "url")
	if w.URL == "" {
		v.addf(up, "is required")
	} else if err := CheckWebhookURL(w.URL); err != nil {
		v.addf(up, "%s", err)
	}
	hp := fieldPath(p, "headers")
	if n := len(w.Headers); n > MaxWebhookHeaders {
		v.addf(hp, "at most %d headers are allowed, got %d", MaxWebhookHeaders, n)
	}
	canonical := map[string]string{} // lower-case name → name as first written
	for _, name := range slices.Sorted(maps.Keys(w.Headers)) {
		kp := keyPath(hp, name)
		switch {
		case len(name) > MaxHeaderNameBytes:
			v.addf(kp, "is %d bytes long: a header name may have at most %d", len(name), MaxHeaderNameBytes)
		case !ValidHeaderName(name):
			v.addf(kp, "is not a valid HTTP header name")
		case reservedHeader(name):
			v.addf(kp, "is set by Tributary on every request and cannot be configured")
		case canonical[strings.ToLower(name)] != "":
			v.addf(kp, "repeats header %q (header names ignore case)", canonical[strings.ToLower(name)])
		default:
			canonical[strings.ToLower(name)] = name
		}
		// Never echo the value: headers often carry tokens.
		switch value := w.Headers[name]; {
		case len(value) > MaxHeaderValueBytes:
			v.addf(kp, "value is %d bytes long: a header value may have at most %d", len(value), MaxHeaderValueBytes)
		case !ValidHeaderValue(value):
			v.addf(kp, "value must not contain control characters such as CR or LF")
		case strings.HasPrefix(value, EncryptedPrefix):
			v.addf(kp, "value %s", encryptedInConfig)
		}
	}
}

// validEquals accepts the scalar types a trait value can be compared with.
func validEquals(x any) bool {
	rv := reflect.ValueOf(x)
	switch rv.Kind() {
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	case reflect.Float32, reflect.Float64:
		return finite(rv.Float())
	default:
		return false
	}
}
