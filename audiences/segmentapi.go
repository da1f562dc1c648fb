package audiences

import (
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Segment's Profile API (docs/audiences.md#segment-profile-api): the paths, parameters, paging,
// answers and error bodies of Segment's, so that code written against it can be pointed at this
// service. A profile is answered by the instance that owns its partition, as the profile API's
// (api.go: forward).

// segmentPrefix starts every path of Segment's Profile API.
const segmentPrefix = "/v1/spaces/"

// Page sizes of Segment's Profile API: 10 by default; traits up to 200, the other lists up to
// 100 (Segment's documentation).
const (
	segmentDefaultLimit = 10
	segmentMaxLimit     = 100
	segmentMaxTraits    = 200
)

// Segment's error codes.
const (
	errAuthentication = "authentication_error"
	errInvalidRequest = "invalid_request_error"
	errRateLimit      = "rate_limit_error"
	errValidation     = "validation_error"
	errNotFound       = "not_found"
)

// segmentHandler serves Segment's Profile API: Basic auth with AUDIENCES_TOKEN as the user name
// and an empty password (a Bearer token works too), the space check, the rate limit.
func (s *Service) segmentHandler() http.Handler {
	mux := http.NewServeMux()
	base := "GET " + segmentPrefix + "{space}/collections/{collection}/profiles/{id}/"
	mux.HandleFunc(base+"traits", s.segmentProfile(s.segmentTraits))
	mux.HandleFunc(base+"events", s.segmentProfile(s.segmentEvents))
	mux.HandleFunc(base+"external_ids", s.segmentProfile(s.segmentExternalIDs))
	mux.HandleFunc(base+"links", s.segmentProfile(s.segmentLinks))
	mux.HandleFunc(base+"metadata", s.segmentProfile(s.segmentMetadata))
	mux.HandleFunc(segmentPrefix, func(w http.ResponseWriter, _ *http.Request) {
		writeSegmentError(w, http.StatusNotFound, errNotFound, "no such endpoint: traits, events, external_ids, links and metadata of /v1/spaces/{space}/collections/users/profiles/{type}:{value}")
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.segmentAuthorized(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="profiles"`)
			writeSegmentError(w, http.StatusUnauthorized, errAuthentication, "missing or wrong access token: the user name of HTTP Basic auth, with an empty password (AUDIENCES_TOKEN)")
			return
		}
		// A request another instance forwarded was counted there.
		if s.limiter != nil && r.Header.Get(headerForwarded) == "" && !s.limiter.Allow() {
			w.Header().Set("Retry-After", "1")
			writeSegmentError(w, http.StatusTooManyRequests, errRateLimit, "too many requests hit the API too quickly (AUDIENCES_PROFILE_API_RATE: "+strconv.Itoa(s.cfg.ProfileAPIRate)+" per second)")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// segmentAuthorized: HTTP Basic with the token as the user name and an empty password
// (Segment's), or the token as a Bearer token (the other routes').
func (s *Service) segmentAuthorized(r *http.Request) bool {
	if user, pass, ok := r.BasicAuth(); ok {
		return pass == "" && subtle.ConstantTimeCompare([]byte(user), []byte(s.cfg.Token)) == 1
	}
	return platform.BearerMatches(r, s.cfg.Token)
}

// segmentError is Segment's error body.
type segmentError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeSegmentError(w http.ResponseWriter, status int, code, msg string) {
	var e segmentError
	e.Error.Code, e.Error.Message = code, msg
	writeJSON(w, status, e)
}

// segmentCursor is the cursor of every list answer.
type segmentCursor struct {
	URL     string `json:"url"`
	HasMore bool   `json:"has_more"`
	Next    string `json:"next"`
	Limit   int    `json:"limit"`
}

// segmentRequest is what a path of the API asks about a profile; its answer is rendered by
// render, under the state's read lock.
type segmentRequest struct {
	r     *http.Request
	q     url.Values
	limit int
	next  string
	now   int64
	model *model
}

// A render builds the answer for one profile under s.mu (read), or returns the 400 of a bad
// parameter (before any profile is looked up: prof is nil then).
type segmentRender func(req *segmentRequest, prof *profile) (answer any, status int, code, msg string)

// externalKey is the profile key of an external id of the given type, and whether a profile
// found under that key has that id (a redirect, which leads to the profile an id was merged
// into, always has). One case per type of external id.
func externalKey(typ, value string, types map[string]bool) (key string, has func(*profile) bool, ok bool) {
	switch typ {
	case "user_id":
		return value, func(p *profile) bool { return !p.active() || p.userID() == value }, true
	case "anonymous_id":
		return value, func(p *profile) bool { return !p.active() || p.userID() == "" }, true
	}
	if !types[typ] {
		return "", nil, false
	}
	// email and the other identifiers: the entry of the id is a redirect to the profile that
	// claimed it (docs/audiences.md#identity-resolution).
	return extKey(typ, value), func(p *profile) bool { return !p.active() }, true
}

// externalIDTypes are the types externalKey knows, for error messages.
const externalIDTypes = "user_id, anonymous_id, email, a device id type (ios.id, android.id...) or a custom type named in AUDIENCES_IDENTITY_PRIORITY or AUDIENCES_IDENTITY_LIMITS"

// segmentProfile answers a path of one profile: the id resolved (a merged id followed to the
// profile it was merged into), forwarded to the instance that owns it, rendered.
func (s *Service) segmentProfile(render segmentRender) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if sp := r.PathValue("space"); s.cfg.SpaceID != "" && sp != s.cfg.SpaceID {
			writeSegmentError(w, http.StatusNotFound, errNotFound, "no space "+strconv.Quote(sp)+" (AUDIENCES_SPACE_ID)")
			return
		}
		if c := r.PathValue("collection"); c != "users" {
			writeSegmentError(w, http.StatusNotFound, errNotFound, "no collection "+strconv.Quote(c)+": only users (accounts are not kept)")
			return
		}
		typ, value, ok := strings.Cut(r.PathValue("id"), ":")
		if !ok || value == "" {
			writeSegmentError(w, http.StatusBadRequest, errValidation, "the profile is <type>:<value>, e.g. user_id:u1")
			return
		}
		key, has, ok := externalKey(typ, value, s.rules.Load().types)
		if !ok {
			writeSegmentError(w, http.StatusBadRequest, errValidation, "unknown external id type "+strconv.Quote(typ)+": "+externalIDTypes)
			return
		}
		req := &segmentRequest{r: r, q: r.URL.Query()}
		if _, status, code, msg := render(req, nil); status != 0 {
			writeSegmentError(w, status, code, msg)
			return
		}
		for hops := 0; hops < 3; hops++ {
			p, ok := s.apiPartitionOf(key)
			if !ok {
				w.Header().Set("Retry-After", "1") // the profile API's 503, as forward's
				writeError(w, http.StatusServiceUnavailable, "unavailable", "starting: the partitions of "+s.cfg.EventsTopic+" are not known yet")
				return
			}
			s.mu.RLock()
			part := s.parts[p]
			if part == nil || !part.restored {
				s.mu.RUnlock()
				target := r.URL.RequestURI()
				if hops > 0 { // the profile a merged id leads to, by its user id
					target = segmentPath(r, "user_id:"+key) + "?" + r.URL.RawQuery
				}
				s.forward(w, r, p, target)
				return
			}
			prof := part.lookup(key) // an external id's entry as a redirect
			switch {
			case prof == nil || prof.Suppressed || (hops == 0 && !has(prof)):
				s.mu.RUnlock()
				writeSegmentError(w, http.StatusNotFound, errNotFound, "Profile was not found.")
				return
			case prof.mergedInto() != "":
				key = prof.mergedInto()
				s.mu.RUnlock()
				continue
			}
			req.now, req.model = s.now().UnixMilli(), s.modelLocked()
			answer, _, _, _ := render(req, prof)
			s.mu.RUnlock()
			writeJSON(w, http.StatusOK, answer)
			return
		}
		writeSegmentError(w, http.StatusNotFound, errNotFound, "Profile was not found.")
	}
}

// segmentPath is r's path with the profile segment replaced by id (escaped).
func segmentPath(r *http.Request, id string) string {
	parts := strings.Split(r.URL.EscapedPath(), "/")
	if len(parts) >= 2 {
		parts[len(parts)-2] = url.PathEscape(id)
	}
	return strings.Join(parts, "/")
}

// paging reads limit (1 to max, default 10) and next; the 400 of a bad limit.
func (req *segmentRequest) paging(maxLimit int) (status int, code, msg string) {
	req.limit, req.next = segmentDefaultLimit, req.q.Get("next")
	if l := req.q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxLimit {
			return http.StatusBadRequest, errValidation, "limit: a whole number from 1 to " + strconv.Itoa(maxLimit) + ", got " + strconv.Quote(l)
		}
		req.limit = n
	}
	return 0, "", ""
}

// cursor is the cursor of a page: the list's URL (the request's, without next), and next,
// the cursor of the following page ("" when none).
func (req *segmentRequest) cursor(next string) segmentCursor {
	q := req.r.URL.Query()
	q.Del("next")
	u := req.r.URL.EscapedPath()
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return segmentCursor{URL: u, HasMore: next != "", Next: next, Limit: req.limit}
}

// csv is a comma-separated parameter as a set (nil when absent).
func csv(v string) map[string]bool {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	out := map[string]bool{}
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out[s] = true
		}
	}
	return out
}

func verbose(q url.Values) bool { v, _ := strconv.ParseBool(q.Get("verbose")); return v }

// traitsAnswer is the answer of /traits.
type traitsAnswer struct {
	Traits json.RawMessage `json:"traits"`
	Cursor segmentCursor   `json:"cursor"`
}

// segmentTraits: the identify traits, computed traits (by trait key) and audiences (their trait
// key: true, for those the profile is in), in the order of their names; class= audience or
// computed_trait keeps those only; include= the names listed. A computed trait or an audience
// wins over an identify trait of the same name.
func (s *Service) segmentTraits(req *segmentRequest, prof *profile) (any, int, string, string) {
	class := req.q.Get("class")
	if prof == nil {
		if class != "" && class != "audience" && class != "computed_trait" {
			return nil, http.StatusBadRequest, errInvalidRequest, "class: audience or computed_trait, got " + strconv.Quote(class)
		}
		st, c, m := req.paging(segmentMaxTraits)
		return nil, st, c, m
	}
	include := csv(req.q.Get("include"))
	wanted := func(k string) bool { return (include == nil || include[k]) && k >= req.next }
	type kv struct {
		k string
		v []byte
	}
	var list []kv
	set := func(k string, v []byte) {
		for i := range list {
			if list[i].k == k {
				list[i].v = v
				return
			}
		}
		list = append(list, kv{k, v})
	}
	if class == "" {
		for _, t := range prof.Traits {
			if wanted(t.K) {
				set(t.K, t.V.appendJSON(nil))
			}
		}
	}
	if class == "" || class == "computed_trait" {
		for _, d := range req.model.traits {
			if wanted(d.key) {
				set(d.key, d.value(prof, req.now).appendJSON(nil))
			}
		}
	}
	if class == "" || class == "audience" {
		for _, d := range req.model.audiences {
			if wanted(d.key) && d.root.eval(prof, req.now) {
				set(d.key, []byte("true"))
			}
		}
	}
	slices.SortFunc(list, func(a, b kv) int { return strings.Compare(a.k, b.k) })
	next := ""
	if len(list) > req.limit {
		next, list = list[req.limit].k, list[:req.limit]
	}
	verb := verbose(req.q)
	b := []byte{'{'}
	for i, t := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = schemas.AppendJSONString(b, t.k)
		b = append(b, ':')
		if verb { // Segment's also has source_id and updated_at, which are not kept
			b = append(append(append(b, `{"value":`...), t.v...), '}')
		} else {
			b = append(b, t.v...)
		}
	}
	b = append(b, '}')
	return traitsAnswer{Traits: b, Cursor: req.cursor(next)}, 0, "", ""
}

// externalID is one external id of a profile, as Segment shows it.
type externalID struct {
	ID         string `json:"id"`
	Type       string `json:"type"`
	Collection string `json:"collection"`
	CreatedAt  string `json:"created_at,omitempty"`
	Encoding   string `json:"encoding"`
}

// externalIDs are the profile's ids: its user id or anonymous id, then the ids merged into it
// (as anonymous_id: an alias's previousId is not told apart).
func externalIDs(prof *profile) []externalID {
	var out []externalID
	created := ""
	if prof.FirstSeen != 0 {
		created = recordTime(prof.FirstSeen)
	}
	if prof.userID() != "" {
		out = append(out, externalID{ID: prof.userID(), Type: "user_id", Collection: "users", CreatedAt: created, Encoding: "none"})
	}
	anon := prof.anonymousID()
	if prof.userID() == "" {
		anon = prof.ID
	}
	if anon != "" {
		out = append(out, externalID{ID: anon, Type: "anonymous_id", Collection: "users", CreatedAt: created, Encoding: "none"})
	}
	for _, m := range prof.merged() {
		if m != anon {
			out = append(out, externalID{ID: m, Type: "anonymous_id", Collection: "users", Encoding: "none"})
		}
	}
	if prof.Identity != nil {
		for _, e := range prof.Identity.IDs {
			out = append(out, externalID{ID: e.Value, Type: e.Type, Collection: "users", CreatedAt: recordTime(e.At), Encoding: "none"})
		}
	}
	return out
}

// listAnswer is the answer of /external_ids, /events and /links.
type listAnswer[T any] struct {
	Data   []T           `json:"data"`
	Cursor segmentCursor `json:"cursor"`
}

// segmentExternalIDs: the profile's external ids; include= the types listed.
func (s *Service) segmentExternalIDs(req *segmentRequest, prof *profile) (any, int, string, string) {
	if prof == nil {
		st, c, m := req.paging(segmentMaxLimit)
		return nil, st, c, m
	}
	include := csv(req.q.Get("include"))
	all := externalIDs(prof)
	var list []externalID
	for _, e := range all {
		if include == nil || include[e.Type] {
			list = append(list, e)
		}
	}
	start := 0
	if req.next != "" { // the type:id of the first of the page
		start = len(list)
		for i, e := range list {
			if e.Type+":"+e.ID == cursorText(req.next) {
				start = i
				break
			}
		}
	}
	list = list[start:]
	next := ""
	if len(list) > req.limit {
		next, list = cursorOf(list[req.limit].Type+":"+list[req.limit].ID), list[:req.limit]
	}
	return listAnswer[externalID]{Data: nonNil(list), Cursor: req.cursor(next)}, 0, "", ""
}

// segmentLinks: the accounts a user is linked to. Accounts (group calls) are not kept: none.
func (s *Service) segmentLinks(req *segmentRequest, prof *profile) (any, int, string, string) {
	if prof == nil {
		st, c, m := req.paging(segmentMaxLimit)
		return nil, st, c, m
	}
	return listAnswer[struct{}]{Data: []struct{}{}, Cursor: req.cursor("")}, 0, "", ""
}

// metadataAnswer is the answer of /metadata.
type metadataAnswer struct {
	Metadata struct {
		CreatedAt string  `json:"created_at,omitempty"`
		UpdatedAt string  `json:"updated_at,omitempty"`
		ExpiresAt *string `json:"expires_at"`
	} `json:"metadata"`
}

// segmentMetadata: when the profile's first and last messages happened. verbose= is accepted
// (the answer is the same).
func (s *Service) segmentMetadata(_ *segmentRequest, prof *profile) (any, int, string, string) {
	var a metadataAnswer
	if prof == nil {
		return nil, 0, "", ""
	}
	if prof.FirstSeen != 0 {
		a.Metadata.CreatedAt, a.Metadata.UpdatedAt = recordTime(prof.FirstSeen), recordTime(prof.LastSeen)
	}
	return a, 0, "", ""
}

// eventAnswer is one event of /events, as Segment shows it (without its context, which is not
// kept).
type eventAnswer struct {
	ExternalIDs []externalID    `json:"external_ids"`
	Type        string          `json:"type"`
	MessageID   string          `json:"message_id,omitempty"`
	SourceID    string          `json:"source_id,omitempty"`
	Timestamp   string          `json:"timestamp"`
	Properties  json.RawMessage `json:"properties"`
	Event       string          `json:"event"`
	Related     struct {
		Users string `json:"users"`
	} `json:"related"`
}

// segmentEvents: the profile's kept track events (docs/audiences.md#profile-events) of the
// lookback, newest first (sort=asc: oldest first); start= and end= (RFC 3339 or a date) bound
// their time, include= and exclude= their names.
func (s *Service) segmentEvents(req *segmentRequest, prof *profile) (any, int, string, string) {
	if prof == nil {
		if st, c, m := req.paging(segmentMaxLimit); st != 0 {
			return nil, st, c, m
		}
		if so := req.q.Get("sort"); so != "" && so != "asc" && so != "desc" {
			return nil, http.StatusBadRequest, errInvalidRequest, "sort: asc or desc, got " + strconv.Quote(so)
		}
		for _, p := range []string{"start", "end"} {
			if v := req.q.Get(p); v != "" {
				if _, err := parseSegmentTime(v); err != nil {
					return nil, http.StatusBadRequest, errInvalidRequest, p + ": an ISO 8601 time (2006-01-02 or 2006-01-02T15:04:05Z), got " + strconv.Quote(v)
				}
			}
		}
		if req.next != "" {
			if _, _, ok := parseEventCursor(req.next); !ok {
				return nil, http.StatusBadRequest, errInvalidRequest, "next: not a cursor this API returned"
			}
		}
		return nil, 0, "", ""
	}
	lo, hi := req.now-s.cfg.ProfileEventsLookback.Milliseconds(), int64(1<<62)
	if v := req.q.Get("start"); v != "" {
		t, _ := parseSegmentTime(v)
		lo = max(lo, t.UnixMilli())
	}
	if v := req.q.Get("end"); v != "" {
		t, _ := parseSegmentTime(v)
		hi = t.UnixMilli()
	}
	include, exclude := csv(req.q.Get("include")), csv(req.q.Get("exclude"))
	var list []tracked
	for _, t := range prof.tracks() {
		if t.At >= lo && t.At < hi && (include == nil || include[t.Event]) && !exclude[t.Event] {
			list = append(list, t)
		}
	}
	asc := req.q.Get("sort") == "asc"
	// Kept in the order of time; a page's order is (time, message id).
	slices.SortStableFunc(list, func(a, b tracked) int { return compareEvent(a.At, a.MessageID, b.At, b.MessageID) })
	if !asc {
		slices.Reverse(list)
	}
	if req.next != "" {
		at, mid, _ := parseEventCursor(req.next)
		i := slices.IndexFunc(list, func(t tracked) bool {
			c := compareEvent(t.At, t.MessageID, at, mid)
			return (asc && c >= 0) || (!asc && c <= 0)
		})
		if i < 0 {
			i = len(list)
		}
		list = list[i:]
	}
	next := ""
	if len(list) > req.limit {
		n := list[req.limit]
		next, list = cursorOf(strconv.FormatInt(n.At, 10)+":"+n.MessageID), list[:req.limit]
	}
	ids := externalIDs(prof)[:1]
	out := make([]eventAnswer, len(list))
	for i, t := range list {
		e := &out[i]
		e.ExternalIDs, e.Type, e.MessageID, e.SourceID = ids, "track", t.MessageID, t.Source
		e.Timestamp, e.Event, e.Related.Users = recordTime(t.At), t.Event, prof.ID
		e.Properties = json.RawMessage("{}")
		if t.Props != "" {
			e.Properties = json.RawMessage(t.Props)
		}
	}
	return listAnswer[eventAnswer]{Data: out, Cursor: req.cursor(next)}, 0, "", ""
}

func compareEvent(at int64, mid string, bt int64, bmid string) int {
	switch {
	case at < bt:
		return -1
	case at > bt:
		return 1
	}
	return strings.Compare(mid, bmid)
}

// parseSegmentTime reads an ISO 8601 time: RFC 3339, or a date (UTC midnight).
func parseSegmentTime(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	return time.Parse(time.DateOnly, v)
}

// Cursors are opaque to clients: the base64 (URL alphabet) of what they hold.
func cursorOf(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func cursorText(c string) string {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return ""
	}
	return string(b)
}

// parseEventCursor reads an /events cursor: "<ms>:<message id>".
func parseEventCursor(c string) (int64, string, bool) {
	ms, mid, ok := strings.Cut(cursorText(c), ":")
	n, err := strconv.ParseInt(ms, 10, 64)
	return n, mid, ok && err == nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
