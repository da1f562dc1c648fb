package console

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// Deletion and suppression requests, in the shapes of Segment's Public API regulations. A
// regulation is written as one tracking.deletions record per subject (keyed by user id, with
// the regulation's id as requestId); the router sends the delete notices and writes one
// tracking.deletions.status record per subject it processed, and every other store (audiences,
// the deliverer, the console's own purge) writes its report there once it is done
// (schemas.DeletionReport). The console reads both topics from their start: a regulation is
// RUNNING until every expected store (CONSOLE_REGULATION_STORES) reported for every subject,
// then FINISHED (docs/console.md#regulations).

// MaxSubjects is the most subject ids one regulation may name (as Segment).
const MaxSubjects = 5000

// Regulation statuses.
const (
	statusRunning  = "RUNNING"
	statusFinished = "FINISHED"
)

// regulationRequest is the body of POST /v1/regulations.
type regulationRequest struct {
	RegulationType string   `json:"regulationType"`
	SubjectType    string   `json:"subjectType"`
	SubjectIDs     []string `json:"subjectIds"`
	SourceIDs      []string `json:"sourceIds"`
}

// subject is one subject of a regulation.
type subject struct {
	requested bool            // its tracking.deletions record was read
	reported  map[string]bool // the stores whose report on it was read (the router's: processed)
}

// storeProgress is what one store reported on a regulation so far.
type storeProgress struct {
	subjects int              // subjects it reported on
	counts   map[string]int64 // summed over them
	last     time.Time        // its latest report
}

// regulation is one regulation as the view holds it.
type regulation struct {
	id        string
	kind      string
	sourceIDs []string
	createdAt time.Time
	subjects  map[string]*subject
	order     []string // subject ids in request order
	requested int
	processed int
	notices   int
	stores    map[string]*storeProgress
}

// regulationView is the API's form of a regulation.
type regulationView struct {
	ID                string     `json:"id"`
	RegulationType    string     `json:"regulationType"`
	SubjectType       string     `json:"subjectType"`
	SubjectIDs        []string   `json:"subjectIds"`
	SourceIDs         []string   `json:"sourceIds"`
	CreatedAt         time.Time  `json:"createdAt"`
	OverallStatus     string     `json:"overallStatus"`
	FinishedAt        *time.Time `json:"finishedAt,omitempty"`
	SubjectsTotal     int        `json:"subjectsTotal"`
	SubjectsProcessed int        `json:"subjectsProcessed"`
	NoticesSent       int        `json:"noticesSent"`
	// FinishedAfterMs is the time from the request to FINISHED (finishedAt - createdAt).
	FinishedAfterMs *int64 `json:"finishedAfterMs,omitempty"`
	// Stores is what each store reported: the expected ones, and any other that reported.
	Stores map[string]storeView `json:"stores"`
}

// storeView is one store's progress on a regulation, in the API.
type storeView struct {
	// Expected: the regulation is FINISHED only once this store reported on every subject.
	Expected         bool             `json:"expected"`
	SubjectsReported int              `json:"subjectsReported"`
	Counts           map[string]int64 `json:"counts"`
	// LastReportAt is when the store's latest report on the regulation was written.
	LastReportAt *time.Time `json:"lastReportAt,omitempty"`
}

// listedSubjects is how many subject ids a list of regulations shows of each (GET
// /v1/regulations/{id} shows them all).
const listedSubjects = 100

// view is the regulation's API form with its first maxSubjects subject ids; expected are the
// stores that must report on every subject before it is FINISHED.
func (g *regulation) view(maxSubjects int, expected []string) regulationView {
	v := regulationView{ID: g.id, RegulationType: g.kind, SubjectType: "USER_ID", SubjectIDs: slices.Clone(g.order[:min(len(g.order), maxSubjects)]), SourceIDs: slices.Clone(g.sourceIDs),
		CreatedAt: g.createdAt, OverallStatus: statusRunning, SubjectsTotal: g.requested, SubjectsProcessed: g.processed, NoticesSent: g.notices,
		Stores: map[string]storeView{}}
	if v.SourceIDs == nil {
		v.SourceIDs = []string{}
	}
	for name, sp := range g.stores {
		at := sp.last
		v.Stores[name] = storeView{SubjectsReported: sp.subjects, Counts: maps.Clone(sp.counts), LastReportAt: &at}
	}
	finished := g.requested > 0
	var finishedAt time.Time
	for _, name := range expected {
		sv, ok := v.Stores[name]
		if !ok {
			sv.Counts = map[string]int64{}
		}
		sv.Expected = true
		v.Stores[name] = sv
		sp := g.stores[name]
		if sp == nil || sp.subjects < g.requested {
			finished = false
		} else if sp.last.After(finishedAt) {
			finishedAt = sp.last
		}
	}
	if finished {
		v.OverallStatus = statusFinished
		v.FinishedAt = &finishedAt
		ms := finishedAt.Sub(g.createdAt).Milliseconds()
		v.FinishedAfterMs = &ms
	}
	return v
}

// regulationLog is every regulation. Safe for concurrent use.
type regulationLog struct {
	mu    sync.Mutex
	byID  map[string]*regulation
	order []*regulation // by first sight
	ready chan struct{}
}

func newRegulationLog() *regulationLog {
	return &regulationLog{byID: map[string]*regulation{}, ready: make(chan struct{})}
}

func (l *regulationLog) get(id string) *regulation {
	g := l.byID[id]
	if g == nil {
		g = &regulation{id: id, subjects: map[string]*subject{}}
		l.byID[id] = g
		l.order = append(l.order, g)
	}
	return g
}

// forget drops a regulation whose records could not be written; called with mu held.
func (l *regulationLog) forget(id string) {
	if g := l.byID[id]; g != nil {
		delete(l.byID, id)
		l.order = slices.DeleteFunc(l.order, func(x *regulation) bool { return x == g })
	}
}

func (g *regulation) subject(user string) *subject {
	sj := g.subjects[user]
	if sj == nil {
		sj = &subject{reported: map[string]bool{}}
		g.subjects[user] = sj
	}
	return sj
}

// requested records a tracking.deletions request; called with mu held.
func (l *regulationLog) requested(id string, req *schemas.DeletionRequest, at time.Time) {
	g := l.get(id)
	if g.kind == "" {
		g.kind, g.sourceIDs, g.createdAt = req.Kind, req.SourceIDs, at
	}
	sj := g.subject(req.UserID)
	if !sj.requested {
		sj.requested = true
		g.requested++
		g.order = append(g.order, req.UserID)
	}
}

// done records a tracking.deletions.status record, a store's report (the router's DeletionStatus,
// st, is the router's report); called with mu held.
func (l *regulationLog) done(rep schemas.DeletionReport, st *schemas.DeletionStatus) {
	g := l.get(rep.RequestID)
	sj := g.subject(rep.UserID)
	if sj.reported[rep.Store] {
		return // read twice (at least once): counted once
	}
	sj.reported[rep.Store] = true
	if g.stores == nil {
		g.stores = map[string]*storeProgress{}
	}
	sp := g.stores[rep.Store]
	if sp == nil {
		sp = &storeProgress{counts: map[string]int64{}}
		g.stores[rep.Store] = sp
	}
	sp.subjects++
	for k, n := range rep.Counts {
		sp.counts[k] += n
	}
	if at, err := schemas.ParseTimestamp(rep.DoneAt); err == nil && at.After(sp.last) {
		sp.last = at.UTC()
	}
	if st != nil {
		g.processed++
		g.notices += st.Notices
	}
}

// runRegulations keeps the regulations view: both topics from their start.
func (s *Service) runRegulations(ctx context.Context) error {
	return s.runView(ctx, "regulations", s.regulations.ready, platform.TopicReaderConfig{
		Topics: []string{s.cfg.DeletionsTopic, s.cfg.DeletionsStatusTopic},
		Apply: func(r *kgo.Record) {
			l := s.regulations
			l.mu.Lock()
			defer l.mu.Unlock()
			if r.Topic == s.cfg.DeletionsStatusTopic {
				if rep, st, err := schemas.DecodeDeletionStatusRecord(r.Value); err == nil {
					l.done(rep, st)
				}
				return
			}
			req, at, err := schemas.DecodeDeletionRequest(r.Value)
			if err != nil {
				return // the router skips it too
			}
			if at.IsZero() {
				at = r.Timestamp
			}
			id := req.RequestID
			if id == "" { // as the router derives it
				id = r.Topic + "-" + strconv.Itoa(int(r.Partition)) + "-" + strconv.FormatInt(r.Offset, 10)
			}
			l.requested(id, req, at.UTC())
		},
	}, nil)
}

var regulationTypes = []string{schemas.KindDeleteOnly, schemas.KindSuppressWithDelete, schemas.KindSuppressOnly, schemas.KindUnsuppress}

func (s *Service) createRegulation(w http.ResponseWriter, r *http.Request) error {
	var req regulationRequest
	if err := decodeJSON(w, r, &req, false); err != nil {
		return err
	}
	id, err := s.submitRegulation(r.Context(), req)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, map[string]string{"regulateId": id})
	return nil
}

// submitRegulation checks a regulation and writes its tracking.deletions records; it returns
// the regulation's id once Kafka acknowledged them.
func (s *Service) submitRegulation(ctx context.Context, req regulationRequest) (string, error) {
	switch {
	case req.RegulationType == "":
		return "", errInvalid("regulationType", "regulationType: required: one of %v", regulationTypes)
	case !slices.Contains(regulationTypes, req.RegulationType):
		return "", errInvalid("regulationType", "regulationType: must be one of %v, got %q", regulationTypes, req.RegulationType)
	case req.SubjectType != "USER_ID":
		return "", errInvalid("subjectType", "subjectType: must be USER_ID, got %q", req.SubjectType)
	case len(req.SubjectIDs) == 0:
		return "", errInvalid("subjectIds", "subjectIds: at least one user id is required")
	case len(req.SubjectIDs) > MaxSubjects:
		return "", errInvalid("subjectIds", "subjectIds: at most %d subject ids per regulation, got %d", MaxSubjects, len(req.SubjectIDs))
	}
	subjects := make([]string, 0, len(req.SubjectIDs))
	seen := make(map[string]bool, len(req.SubjectIDs))
	for i, id := range req.SubjectIDs {
		if err := schemas.CheckSubjectID(id); err != nil {
			return "", errInvalid(fmt.Sprintf("subjectIds[%d]", i), "subjectIds[%d]: %v", i, err)
		}
		if !seen[id] {
			seen[id] = true
			subjects = append(subjects, id)
		}
	}
	snap := s.deps.Store.Snapshot()
	for i, id := range req.SourceIDs {
		if _, ok := snap.SourceByID(id); !ok {
			return "", errInvalid(fmt.Sprintf("sourceIds[%d]", i), "sourceIds[%d]: no source %q", i, id)
		}
	}
	// Each subject's record carries the source ids: once each keeps it small.
	req.SourceIDs = dedupe(req.SourceIDs)
	id := uuid.NewString()
	now := s.now().UTC().Truncate(time.Millisecond) // as read back from requestedAt
	recs := make([]*kgo.Record, len(subjects))
	reqs := make([]schemas.DeletionRequest, len(subjects))
	for i, user := range subjects {
		reqs[i] = schemas.DeletionRequest{UserID: user, Kind: req.RegulationType, SourceIDs: req.SourceIDs, RequestID: id, RequestedAt: schemas.FormatTimestamp(now)}
		v, err := json.Marshal(&reqs[i])
		if err != nil {
			return "", err
		}
		recs[i] = &kgo.Record{Topic: s.cfg.DeletionsTopic, Key: []byte(user), Value: v}
	}
	// Into the view first, in request order (reading the topic back adds nothing more).
	s.regulations.mu.Lock()
	for i := range reqs {
		s.regulations.requested(id, &reqs[i], now.UTC())
	}
	s.regulations.mu.Unlock()
	if err := s.producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		s.regulations.mu.Lock()
		s.regulations.forget(id)
		s.regulations.mu.Unlock()
		return "", fmt.Errorf("writing %s: %w", s.cfg.DeletionsTopic, err)
	}
	s.metrics.regulations.WithLabelValues(req.RegulationType).Inc()
	s.logger.Info().Str("regulation", id).Str("type", req.RegulationType).Int("subjects", len(subjects)).Msg("regulation created")
	return id, nil
}

// dedupe returns ids without repeats, in their first order.
func dedupe(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	return slices.DeleteFunc(slices.Clone(ids), func(id string) bool {
		if seen[id] {
			return true
		}
		seen[id] = true
		return false
	})
}

func (s *Service) listRegulations(w http.ResponseWriter, r *http.Request) error {
	limit, err := pageLimit(r, 100)
	if err != nil {
		return err
	}
	start := 0
	if c := r.URL.Query().Get("cursor"); c != "" {
		if start, err = strconv.Atoi(c); err != nil || start < 0 {
			return errInvalid("cursor", "cursor: not a cursor of this API: %q", c)
		}
	}
	out := []regulationView{}
	next := ""
	s.regulations.mu.Lock()
	skipped := 0
	for i := len(s.regulations.order) - 1; i >= 0; i-- { // newest first
		g := s.regulations.order[i]
		if g.requested == 0 {
			continue // statuses read before their request: not listed yet
		}
		if skipped < start {
			skipped++
			continue
		}
		if len(out) == limit {
			next = strconv.Itoa(start + limit)
			break
		}
		out = append(out, g.view(listedSubjects, s.cfg.RegulationStores))
	}
	s.regulations.mu.Unlock()
	page := map[string]any{"data": out}
	if next != "" {
		page["nextCursor"] = next
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Service) getRegulation(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	s.regulations.mu.Lock()
	g := s.regulations.byID[id]
	var v regulationView
	if g != nil && g.requested > 0 {
		v = g.view(MaxSubjects, s.cfg.RegulationStores)
	}
	s.regulations.mu.Unlock()
	if v.ID == "" {
		return errNotFound("no regulation %q", id)
	}
	writeData(w, http.StatusOK, v)
	return nil
}

// reportRegulation writes the console's own report on one subject of a regulation to
// tracking.deletions.status (a schemas.DeletionReport keyed "<requestId>/console"), returning
// once Kafka acknowledged it: the console calls it once its views have forgotten the user
// (purged counts what went, schemas.CountPurged). With "console" in CONSOLE_REGULATION_STORES,
// a regulation is FINISHED only after it (docs/console.md#regulations).
func (s *Service) reportRegulation(ctx context.Context, requestID, userID, kind string, purged int64) error {
	rep := schemas.DeletionReport{RequestID: requestID, UserID: userID, Store: schemas.StoreConsole, Kind: kind,
		Counts: map[string]int64{schemas.CountPurged: purged}, DoneAt: schemas.FormatTimestamp(s.now())}
	rec := &kgo.Record{Topic: s.cfg.DeletionsStatusTopic, Key: []byte(schemas.DeletionReportKey(requestID, schemas.StoreConsole)), Value: rep.Record()}
	if err := s.producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("producing to %s: %w", rec.Topic, err)
	}
	return nil
}
