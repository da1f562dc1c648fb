package audiences

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The profile API (docs/audiences.md#profile-api). Every profile lives in the memory of the
// instance that owns its tracking.events partition; a request for another instance's user
// is forwarded to it (AUDIENCES_PEER_URL), once.

// headerForwarded marks a request one instance forwarded to another: it is never forwarded
// again.
const headerForwarded = "X-Tributary-Forwarded"

// Member pages.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// ownersTTL is how long a description of the group's assignment is used before it is asked
// for again.
const ownersTTL = 2 * time.Second

// Handler returns the profile API (without /healthz, /readyz and /metrics, which the
// service's HTTP server adds).
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/profiles/{id}", s.getProfile)
	mux.HandleFunc("GET /v1/audiences/{id}", s.getAudience)
	mux.HandleFunc("GET /v1/audiences/{id}/members", s.getMembers)
	mux.HandleFunc("POST /v1/audiences/preview", s.previewAudience)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint")
	})
	// Segment's Profile API (segmentapi.go) takes the token its own way (HTTP Basic).
	segment := s.segmentHandler()
	// Every request but /healthz, /readyz and /metrics (the HTTP server's) shows the token
	// (AUDIENCES_TOKEN, required: Config.Validate).
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, segmentPrefix) {
			segment.ServeHTTP(w, r)
			return
		}
		if !platform.BearerMatches(r, s.cfg.Token) { // "bearer" in any case, as the console takes it
			w.Header().Set("WWW-Authenticate", `Bearer realm="audiences"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token (AUDIENCES_TOKEN)")
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, schemas.ProfileAPIError{Code: code, Message: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// The profile API's requests and answers are declared in schemas (schemas/profiles.go), with
// the console's client that reads them; these are their names here.
type (
	// ProfileView is the answer of GET /v1/profiles/{id}.
	ProfileView = schemas.ProfileView
	// AudienceRef names an audience a profile belongs to.
	AudienceRef = schemas.AudienceRef
	// AudienceView is the answer of GET /v1/audiences/{id}.
	AudienceView = schemas.AudienceView
	// MembersPage is the answer of GET /v1/audiences/{id}/members.
	MembersPage = schemas.MembersPage
	// Member is one member of an audience.
	Member = schemas.Member
	// PreviewRequest is the body of POST /v1/audiences/preview.
	PreviewRequest = schemas.PreviewRequest
	// PreviewView is the answer of POST /v1/audiences/preview.
	PreviewView = schemas.PreviewView
)

func (s *Service) getProfile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	for hops := 0; hops < 3; hops++ {
		p, ok := s.apiPartitionOf(id)
		if !ok {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "unavailable", "starting: the partitions of "+s.cfg.EventsTopic+" are not known yet")
			return
		}
		s.mu.RLock()
		part := s.parts[p]
		if part == nil || !part.restored {
			s.mu.RUnlock()
			s.forward(w, r, p, "/v1/profiles/"+url.PathEscape(id))
			return
		}
		prof := part.profiles[id]
		switch {
		case prof == nil || prof.Suppressed:
			s.mu.RUnlock()
			writeError(w, http.StatusNotFound, "not_found", "no profile for this id")
			return
		case prof.mergedInto() != "":
			id = prof.mergedInto()
			s.mu.RUnlock()
			continue
		}
		view := s.profileView(prof)
		s.mu.RUnlock()
		writeJSON(w, http.StatusOK, view)
		return
	}
	writeError(w, http.StatusNotFound, "not_found", "no profile for this id")
}

// profileView renders a profile; s.mu is held.
func (s *Service) profileView(p *profile) ProfileView {
	now := s.now().UnixMilli()
	traits, _ := p.Traits.MarshalJSON()
	v := ProfileView{UserID: p.userID(), AnonymousID: p.anonymousID(), Traits: traits,
		ComputedTraits: map[string]json.RawMessage{}, Audiences: []AudienceRef{}, MergedIDs: p.merged()}
	if p.userID() == "" {
		v.AnonymousID = p.ID
	}
	if x := p.Identity; x != nil {
		for _, e := range x.IDs {
			v.ExternalIDs = append(v.ExternalIDs, schemas.ExternalIDView{Type: e.Type, ID: e.Value, LinkedAt: recordTime(e.At)})
		}
		for _, e := range x.Log {
			v.Identity = append(v.Identity, schemas.IdentityEventView{At: recordTime(e.At), Kind: e.Kind, Type: e.Type, ID: e.Value,
				Rule: e.Rule, Other: e.Other, Detail: e.Detail})
		}
	}
	if p.FirstSeen != 0 {
		v.FirstSeen = recordTime(p.FirstSeen)
		v.LastSeen = recordTime(p.LastSeen)
	}
	m := s.modelLocked()
	for _, d := range m.traits {
		v.ComputedTraits[d.key] = d.value(p, now).appendJSON(nil)
	}
	for _, d := range m.audiences {
		if d.root.eval(p, now) {
			v.Audiences = append(v.Audiences, AudienceRef{ID: d.id, Key: d.key})
		}
	}
	return v
}

// modelLocked returns the model of the current config; s.mu is held (a read lock is enough:
// a model the transform has not compiled yet is compiled here without being kept).
func (s *Service) modelLocked() *model {
	snap := s.deps.Config()
	if s.modelSet && snap.Version() == s.modelVer {
		return s.model
	}
	return compile(snap.Audiences(), snap.ComputedTraits())
}

func (s *Service) getAudience(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	a, ok := s.audienceConfig(id)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no audience %q", id))
		return
	}
	view := s.localAudience(a)
	if r.URL.Query().Get("scope") != "local" && r.Header.Get(headerForwarded) == "" && view.Partitions < view.Total {
		s.addPeers(r, &view)
	}
	view.Partial = view.Partitions < view.Total
	writeJSON(w, http.StatusOK, view)
}

type audienceInfo struct{ id, name, key, source string }

func (s *Service) audienceConfig(id string) (*audienceInfo, bool) {
	for _, a := range s.deps.Config().Audiences() {
		if a.ID == id {
			return &audienceInfo{id: a.ID, name: a.Name, key: a.TraitKey(), source: a.Source}, true
		}
	}
	return nil, false
}

// localAudience sums the audience's figures over the partitions this instance owns.
func (s *Service) localAudience(a *audienceInfo) AudienceView {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v := AudienceView{ID: a.id, Name: a.name, Key: a.key, Source: a.source, Total: int(s.nparts)}
	if d := s.modelLocked().audienceByID(a.id); d != nil {
		v.Realtime = d.realtime
		v.Backfill = s.localBackfill(d.aggKeys)
	}
	st := s.stats["a/"+a.id]
	var last time.Time
	for p, part := range s.parts {
		if !part.restored {
			continue
		}
		v.Partitions++
		if st == nil {
			continue
		}
		v.Members += st.members[p]
		v.LastSync.Joins += st.joins[p]
		v.LastSync.Leaves += st.leaves[p]
	}
	if st != nil {
		last = st.lastSync
	}
	if !last.IsZero() {
		v.LastSyncAt = recordTime(last.UnixMilli())
	}
	return v
}

// addPeers adds the figures of every other instance of the group (asked with scope=local).
func (s *Service) addPeers(r *http.Request, v *AudienceView) {
	for _, inst := range s.peerInstances(r) {
		var peer AudienceView
		if err := s.askPeer(r, inst, "/v1/audiences/"+url.PathEscape(v.ID)+"?scope=local", nil, &peer); err != nil {
			s.logger.Warn().Err(err).Str("instance", inst).Msg("asking another audiences instance")
			continue
		}
		v.Partitions += peer.Partitions
		v.Members += peer.Members
		v.LastSync.Joins += peer.LastSync.Joins
		v.LastSync.Leaves += peer.LastSync.Leaves
		addBackfill(v, peer.Backfill)
		if peer.LastSyncAt > v.LastSyncAt {
			v.LastSyncAt = peer.LastSyncAt
		}
	}
}

// peerInstances returns the other instances of the group that own partitions (none when
// AUDIENCES_PEER_URL is not set or the group cannot be described).
func (s *Service) peerInstances(r *http.Request) []string {
	if s.cfg.PeerURL == "" {
		return nil
	}
	owners, err := s.owners(r.Context())
	if err != nil {
		s.logger.Warn().Err(err).Msg("describing the audiences group for the profile API")
		return nil
	}
	var out []string
	seen := map[string]bool{s.cfg.TransactionalID: true}
	for _, inst := range owners {
		if !seen[inst] {
			seen[inst] = true
			out = append(out, inst)
		}
	}
	return out
}

// getMembers pages through an audience's current members, partition by partition: the
// cursor is "<partition>:<last id>" and a page of a partition another instance owns is asked
// of that instance.
func (s *Service) getMembers(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, ok := s.audienceConfig(id); !ok {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no audience %q", id))
		return
	}
	q := r.URL.Query()
	limit := defaultPageSize
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxPageSize {
			writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("limit: a whole number from 1 to %d", maxPageSize))
			return
		}
		limit = n
	}
	p, after, err := parseCursor(q.Get("cursor"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "cursor: "+err.Error())
		return
	}
	page := MembersPage{Data: []Member{}}
	s.mu.RLock()
	d := s.modelLocked().audienceByID(id)
	n := s.nparts
	now := s.now().UnixMilli()
	for p < n && len(page.Data) < limit {
		part := s.parts[p]
		if part == nil || !part.restored {
			break
		}
		var ids []string
		for key, prof := range part.profiles {
			if key > after && prof.active() && d != nil && d.root.eval(prof, now) {
				ids = append(ids, key)
			}
		}
		sort.Strings(ids)
		room := limit - len(page.Data)
		full := len(ids) > room
		if full {
			ids = ids[:room]
		}
		for _, key := range ids {
			prof := part.profiles[key]
			m := Member{UserID: prof.userID()}
			if prof.userID() == "" {
				m.AnonymousID = key
			}
			page.Data = append(page.Data, m)
		}
		if full {
			after = ids[len(ids)-1]
			break
		}
		p, after = p+1, ""
	}
	s.mu.RUnlock()
	if p < n && len(page.Data) == 0 {
		// The cursor's partition is another instance's (or being restored).
		s.forward(w, r, p, r.URL.Path+"?"+r.URL.RawQuery)
		return
	}
	if p < n {
		page.Next = formatCursor(p, after)
	}
	writeJSON(w, http.StatusOK, page)
}

func parseCursor(c string) (int32, string, error) {
	if c == "" {
		return 0, "", nil
	}
	ps, after, ok := strings.Cut(c, ":")
	p, err := strconv.ParseInt(ps, 10, 32)
	if !ok || err != nil || p < 0 {
		return 0, "", errors.New("not a cursor this API returned")
	}
	return int32(p), after, nil
}

func formatCursor(p int32, after string) string { return strconv.Itoa(int(p)) + ":" + after }

// forward answers a request for partition p from the instance that owns it: 503 (Retry-After)
// when the owner is this instance (still restoring), unknown, not reachable, or the request
// was forwarded already.
func (s *Service) forward(w http.ResponseWriter, r *http.Request, p int32, pathAndQuery string) {
	unavailable := func(msg string) {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "unavailable", msg)
	}
	if r.Header.Get(headerForwarded) != "" {
		unavailable(fmt.Sprintf("partition %d is not owned here (the group is rebalancing)", p))
		return
	}
	owners, err := s.owners(r.Context())
	if err != nil {
		unavailable("the owner of partition " + strconv.Itoa(int(p)) + " is not known yet")
		return
	}
	inst, ok := owners[p]
	switch {
	case !ok:
		unavailable(fmt.Sprintf("partition %d has no owner (the group is rebalancing)", p))
		return
	case inst == s.cfg.TransactionalID:
		unavailable(fmt.Sprintf("partition %d is being restored from %s", p, s.cfg.StateTopic))
		return
	case s.cfg.PeerURL == "":
		unavailable(fmt.Sprintf("partition %d is owned by instance %s and AUDIENCES_PEER_URL is not set", p, inst))
		return
	}
	target := strings.ReplaceAll(s.cfg.PeerURL, "{instance}", inst)
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, strings.TrimSuffix(target, "/")+pathAndQuery, nil)
	if err != nil {
		unavailable("AUDIENCES_PEER_URL does not make a URL: " + err.Error())
		return
	}
	req.Header.Set(headerForwarded, s.cfg.TransactionalID)
	if a := r.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
	}
	resp, err := s.peers.Do(req)
	if err != nil {
		unavailable(fmt.Sprintf("instance %s (owner of partition %d) did not answer", inst, p))
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, io.LimitReader(resp.Body, 16<<20))
}

// askPeer asks instance inst for pathAndQuery and decodes its 200 answer into into: a GET, or
// a POST of body when body is not nil.
func (s *Service) askPeer(r *http.Request, inst, pathAndQuery string, body []byte, into any) error {
	target := strings.TrimSuffix(strings.ReplaceAll(s.cfg.PeerURL, "{instance}", inst), "/") + pathAndQuery
	method, rd := http.MethodGet, io.Reader(nil)
	if body != nil {
		method, rd = http.MethodPost, bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(r.Context(), method, target, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set(headerForwarded, s.cfg.TransactionalID)
	if a := r.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
	}
	resp, err := s.peers.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", inst, resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(into)
}

// owners returns, for each tracking.events partition, the instance id (static member id) of
// the group member it is assigned to; cached for ownersTTL.
func (s *Service) owners(ctx context.Context) (map[int32]string, error) {
	s.ownersMu.Lock()
	defer s.ownersMu.Unlock()
	if s.ownersMap != nil && time.Since(s.ownersAt) < ownersTTL {
		return s.ownersMap, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	groups, err := kadm.NewClient(s.producer).DescribeGroups(ctx, s.cfg.Group)
	if err != nil {
		return nil, err
	}
	g, ok := groups[s.cfg.Group]
	if !ok || g.Err != nil {
		return nil, fmt.Errorf("describing group %s: %v", s.cfg.Group, g.Err)
	}
	out := map[int32]string{}
	for _, m := range g.Members {
		c, ok := m.Assigned.AsConsumer()
		if !ok || m.InstanceID == nil {
			continue
		}
		for _, t := range c.Topics {
			if t.Topic != s.cfg.EventsTopic {
				continue
			}
			for _, p := range t.Partitions {
				out[p] = *m.InstanceID
			}
		}
	}
	s.ownersMap, s.ownersAt = out, time.Now()
	return out, nil
}

// maxPreviewBody bounds the body of POST /v1/audiences/preview.
const maxPreviewBody = 1 << 20

// previewAudience counts the profiles that match a candidate rule now, with the evaluation of
// membership, over this instance's partitions plus (asked with scope=local) every other
// instance's.
func (s *Service) previewAudience(w http.ResponseWriter, r *http.Request) {
	var req PreviewRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxPreviewBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is larger than %d bytes", maxPreviewBody))
			return
		}
		writeError(w, http.StatusBadRequest, "bad_request", "the body must be a JSON object {\"rule\": {...}, \"now\": \"<timestamp>\"}: "+err.Error())
		return
	}
	if len(bytes.TrimSpace(req.Rule)) == 0 || bytes.Equal(bytes.TrimSpace(req.Rule), []byte("null")) {
		writeError(w, http.StatusBadRequest, "bad_request", "rule: is required")
		return
	}
	now := s.now()
	if req.Now != "" {
		t, err := schemas.ParseTimestamp(req.Now)
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", "now: "+err.Error())
			return
		}
		now = t
	}
	aud, err := parsePreviewRule(req.Rule)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	s.mu.RLock()
	n := s.nparts
	s.mu.RUnlock()
	if n == 0 {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "starting: the partitions of "+s.cfg.EventsTopic+" are not known yet")
		return
	}
	view := s.localPreview(aud, now)
	if r.URL.Query().Get("scope") != "local" && r.Header.Get(headerForwarded) == "" && view.Partitions < view.Total {
		body, _ := json.Marshal(PreviewRequest{Rule: req.Rule, Now: view.At})
		for _, inst := range s.peerInstances(r) {
			var peer PreviewView
			if err := s.askPeer(r, inst, "/v1/audiences/preview?scope=local", body, &peer); err != nil {
				s.logger.Warn().Err(err).Str("instance", inst).Msg("asking another audiences instance")
				continue
			}
			view.Partitions += peer.Partitions
			view.Count += peer.Count
			view.Profiles += peer.Profiles
		}
	}
	if view.Partitions == 0 {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the partitions of "+s.cfg.EventsTopic+" are being restored from "+s.cfg.StateTopic)
		return
	}
	view.Partial = view.Partitions < view.Total
	writeJSON(w, http.StatusOK, view)
}

// parsePreviewRule parses a rule with the config parser and checks it as an audience's rule:
// the problems name the field from "rule".
func parsePreviewRule(rule json.RawMessage) (*schemas.Audience, error) {
	doc := append(append([]byte(`{"audiences":[{"id":"preview","name":"Preview","source":"preview","rule":`), rule...), "}]}"...)
	cfg, err := schemas.ParseConfig(doc, schemas.ConfigFormatJSON)
	if err == nil {
		err = cfg.Audiences[0].Validate()
	}
	var errs schemas.ConfigErrors
	if errors.As(err, &errs) && len(errs) > 0 {
		e := errs[0]
		path := strings.TrimPrefix(strings.TrimPrefix(e.Path, "audiences[0]"), ".")
		if path == "" {
			return nil, errors.New(e.Message)
		}
		return nil, errors.New(path + ": " + e.Message)
	}
	if err != nil {
		return nil, err
	}
	return &cfg.Audiences[0], nil
}

// localPreview counts the matching profiles of the partitions this instance has restored.
func (s *Service) localPreview(aud *schemas.Audience, at time.Time) PreviewView {
	now := at.UnixMilli()
	v := PreviewView{At: recordTime(now)}
	s.mu.RLock()
	defer s.mu.RUnlock()
	cur := s.modelLocked()
	// The candidate rule is compiled beside the config's audiences, which its audience
	// conditions name.
	snap := s.deps.Config()
	root := compile(snap.Audiences(), snap.ComputedTraits()).compileNode(&aud.Rule)
	root.walk(func(n *node) {
		if n.agg != nil && !cur.aggKeys[n.agg.key] {
			v.NewAggregate = true
		}
	})
	v.Total = int(s.nparts)
	for _, part := range s.parts {
		if !part.restored {
			continue
		}
		v.Partitions++
		for _, prof := range part.profiles {
			if !prof.active() {
				continue
			}
			v.Profiles++
			if root.eval(prof, now) {
				v.Count++
			}
		}
	}
	return v
}

// walk calls fn for n and every node under it.
func (n *node) walk(fn func(*node)) {
	fn(n)
	for _, c := range n.children {
		c.walk(fn)
	}
}
