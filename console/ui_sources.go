package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/schemas"
)

// The sources pages: the list, creating one (its write key shown once, with a first event's
// curl), rotating its key, its tracking plan, and the live debugger.

func (u *ui) sourcePages(pg func(string, http.HandlerFunc)) {
	pg("GET /sources", u.sources)
	pg("GET /sources/new", u.newSource)
	pg("POST /sources/new", u.createSource)
	pg("GET /sources/{id}", u.source)
	pg("POST /sources/{id}", u.updateSource)
	pg("POST /sources/{id}/rotate", u.rotateSource)
	pg("GET /sources/{id}/key", u.sourceKey)
	pg("POST /sources/{id}/delete", u.deleteSource)
	pg("GET /sources/{id}/live", func(w http.ResponseWriter, r *http.Request) {
		// The stream ends when the session does, by expiry or sign-out (EventSource reconnects,
		// and is sent to sign in); it counts against the session's stream limit.
		sess := u.session(r)
		if sess == nil { // signed out since signedIn looked
			http.Error(w, "sign in first", http.StatusUnauthorized)
			return
		}
		ctx, cancel := context.WithDeadline(r.Context(), sess.expires)
		defer cancel()
		revoked, stop := u.s.sessions.watch(sess.key)
		defer stop()
		go func() {
			select {
			case <-revoked:
				cancel()
			case <-ctx.Done():
			}
		}()
		if err := u.s.streamEvents(w, r.WithContext(ctx), "session:"+sess.key, true); err != nil {
			u.fail(w, r, err)
		}
	})
}

func (u *ui) sources(w http.ResponseWriter, r *http.Request) {
	snap := u.s.deps.Store.Snapshot()
	now := u.s.now()
	var rows []sourceRow
	for _, src := range snap.Sources() {
		row := sourceRow{ID: src.ID, Name: src.Name}
		row.Accepted, row.Rejected = u.s.events.LastHour(src.ID, now)
		rows = append(rows, row)
	}
	u.render(w, r, http.StatusOK, "sources", page{Title: "Sources", Nav: "sources", Data: rows})
}

// sourceForm is the new-source form, with the errors next to its fields.
type sourceForm struct {
	ID, Name string
	Errors   map[string]string
}

func (u *ui) newSource(w http.ResponseWriter, r *http.Request) {
	u.render(w, r, http.StatusOK, "source_new", page{Title: "Add a source", Nav: "sources", Data: sourceForm{}})
}

// fieldErrors maps an API error to the form fields it names (field paths of the object; the
// first path element); a problem without a field is the form's.
func fieldErrors(err error) (map[string]string, string) {
	var ae *apiError
	if !errors.As(err, &ae) {
		return nil, "Something failed: see the console's log."
	}
	out := map[string]string{}
	list := ae.Errors
	if len(list) == 0 {
		list = []fieldError{{Field: ae.Field, Message: ae.Message}}
	}
	var general []string
	for _, e := range list {
		msg := e.Message
		if e.Field == "" {
			general = append(general, msg)
			continue
		}
		msg = strings.TrimPrefix(msg, e.Field+": ")
		if _, seen := out[e.Field]; !seen {
			out[e.Field] = msg
		}
	}
	return out, strings.Join(general, " ")
}

func (u *ui) createSource(w http.ResponseWriter, r *http.Request) {
	f := sourceForm{ID: strings.TrimSpace(r.PostFormValue("id")), Name: strings.TrimSpace(r.PostFormValue("name"))}
	o := schemas.ConfigObject{Kind: schemas.ConfigKindSource, ID: f.ID, Source: &schemas.Source{ID: f.ID, Name: f.Name}}
	_, key, err := u.s.newSource(r.Context(), o)
	if err != nil {
		var general string
		f.Errors, general = fieldErrors(err)
		u.render(w, r, http.StatusBadRequest, "source_new", page{Title: "Add a source", Nav: "sources", Error: general, Data: f})
		return
	}
	u.showKey(w, r, keyData{ID: f.ID, Key: key}, "Source "+f.ID+" created.")
}

// sealedKey is a new write key on its way to the page that shows it (seal).
const sealedKey = "write-key"

// showKey redirects to the page that shows a new write key (post/redirect/get: a reload
// shows the key again for sealTTL, and creates or rotates nothing).
func (u *ui) showKey(w http.ResponseWriter, r *http.Request, k keyData, done string) {
	b, _ := json.Marshal(k)
	u.redirect(w, r, "/sources/"+url.PathEscape(k.ID)+"/key?k="+u.seal(u.session(r), sealedKey, b), done)
}

// sourceKey shows a new write key, sealed in the URL by showKey for this session.
func (u *ui) sourceKey(w http.ResponseWriter, r *http.Request) {
	var k keyData
	b, ok := u.unseal(u.session(r), sealedKey, r.URL.Query().Get("k"))
	if !ok || json.Unmarshal(b, &k) != nil || k.ID != r.PathValue("id") {
		u.render(w, r, http.StatusGone, "error", page{Title: "Write key no longer shown", Nav: "sources",
			Error: fmt.Sprintf("A new write key is shown for %s after it is made, to the browser that made it: Tributary keeps only its hash. If it was not copied, rotate the key of source %s to get a new one.", fmtDuration(sealTTL), r.PathValue("id"))})
		return
	}
	title := "Write key of " + k.ID
	u.render(w, r, http.StatusOK, "source_key", page{Title: title, Nav: "sources", Data: u.keyPage(k.ID, k.Key, k.Expires)})
}

// keyData is the page that shows a write key once.
type keyData struct {
	ID, Key, IngestURL, Expires string
}

func (u *ui) keyPage(id, key, expires string) keyData {
	return keyData{ID: id, Key: key, IngestURL: strings.TrimSuffix(u.s.cfg.IngestURL, "/"), Expires: expires}
}

// sourceData is the source page's data.
type sourceData struct {
	// PIIMasked: its recent and live events are masked (docs/console.md#pii-access).
	PIIMasked      bool
	Source         *schemas.Source
	Version        int64
	Blocked        string // one event name per line
	KeyExpires     string
	Destinations   []string
	Recent         []eventView
	Accepted       uint64
	Rejected       uint64
	Errors         map[string]string
	Overlaps       []string
	ManagedByFile  bool
	DestinationIDs []string
	Types          []string // the live debugger's type filter
	// Violations are the tracking-plan violations of the last 24 hours (a source with a
	// planId; docs/console.md#violations).
	Violations *views.ViolationsView
}

func (u *ui) sourceData(id string, mask *piiMask) (*sourceData, bool) {
	snap := u.s.deps.Store.Snapshot()
	src, ok := snap.SourceByID(id)
	if !ok {
		return nil, false
	}
	d := &sourceData{Source: src, Version: snap.Revision(schemas.ConfigKindSource, id), Overlaps: []string{"0s", "1h", "24h", "168h"}, Types: testTypes,
		ManagedByFile: strings.HasPrefix(src.Origin, schemas.OriginFilePrefix)}
	if src.TrackingPlan != nil {
		d.Blocked = strings.Join(src.TrackingPlan.BlockedEvents, "\n")
	}
	if exp, err := schemas.ParseTimestamp(src.PreviousWriteKeyExpiresAt); err == nil && exp.After(u.s.now()) {
		d.KeyExpires = fmtWhen(exp)
	}
	for _, dest := range snap.DestinationsForSource(id) {
		d.Destinations = append(d.Destinations, dest.ID)
	}
	if recent := u.s.events.Recent(id, -1); len(recent) > 0 {
		slices.Reverse(recent) // oldest first: the page's script puts each on top
		d.Recent = mask.events(recent)
	}
	d.PIIMasked = mask.masks()
	d.Accepted, d.Rejected = u.s.events.LastHour(id, u.s.now())
	if src.TrackingPlan.HasSchemas() {
		v := u.s.violations.Of(id, u.s.now())
		d.Violations = &v
	}
	return d, true
}

func (u *ui) source(w http.ResponseWriter, r *http.Request) {
	d, ok := u.sourceData(r.PathValue("id"), u.s.maskOf(r))
	if !ok {
		u.fail(w, r, errNotFound("There is no source %q.", r.PathValue("id")))
		return
	}
	u.render(w, r, http.StatusOK, "source", page{Title: "Source " + d.Source.ID, Nav: "sources", Data: d})
}

// updateSource renames the source and sets its blocked events.
func (u *ui) updateSource(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var blocked []string
	for _, line := range strings.Split(r.PostFormValue("blocked"), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			blocked = append(blocked, line)
		}
	}
	patch := map[string]any{"name": strings.TrimSpace(r.PostFormValue("name")), "trackingPlan": nil}
	if src, ok := u.s.deps.Store.Snapshot().SourceByID(id); ok && src.TrackingPlan.HasSchemas() {
		// The form sets the blocked events only: the plan and its options stay (a merge).
		patch["trackingPlan"] = map[string]any{"blockedEvents": nil}
	}
	if len(blocked) > 0 {
		patch["trackingPlan"] = map[string]any{"blockedEvents": blocked}
	}
	opts := writeOptions{IfMatch: r.PostFormValue("version"), TakeOver: r.PostFormValue("takeOver") == "true"}
	if _, err := u.s.updateObject(r.Context(), schemas.ConfigKindSource, id, patch, opts, nil); err != nil {
		d, ok := u.sourceData(id, u.s.maskOf(r))
		if !ok {
			u.fail(w, r, err)
			return
		}
		var general string
		d.Errors, general = fieldErrors(err)
		u.render(w, r, statusOf(err), "source", page{Title: "Source " + id, Nav: "sources", Error: general, Data: d})
		return
	}
	u.redirect(w, r, "/sources/"+id, "Source "+id+" saved.")
}

// statusOf is the HTTP status of an error (400 for a plain one).
func statusOf(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return http.StatusInternalServerError
}

func (u *ui) rotateSource(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	overlap, err := time.ParseDuration(r.PostFormValue("overlap"))
	if err != nil || overlap < 0 || overlap > u.s.cfg.MaxKeyOverlap {
		u.fail(w, r, errInvalid("overlap", "Choose how long the old key keeps working."))
		return
	}
	_, key, expires, err := u.s.rotateWriteKey(r.Context(), id, overlap, writeOptions{TakeOver: r.PostFormValue("takeOver") == "true"})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	if expires != "" {
		t, _ := schemas.ParseTimestamp(expires)
		expires = fmtWhen(t)
	}
	u.showKey(w, r, keyData{ID: id, Key: key, Expires: expires}, "Write key of "+id+" rotated.")
}

func (u *ui) deleteSource(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := u.s.removeObject(r.Context(), schemas.ConfigKindSource, id, writeOptions{TakeOver: r.PostFormValue("takeOver") == "true"}); err != nil {
		u.fail(w, r, err)
		return
	}
	u.redirect(w, r, "/sources", "Source "+id+" deleted.")
}
