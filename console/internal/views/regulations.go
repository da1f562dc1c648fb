package views

import (
	"iter"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// The regulations (docs/console.md#regulations): what tracking.deletions asked and what every
// store reported on tracking.deletions.status. A regulation is RUNNING until every expected
// store reported for every subject, then FINISHED.

// Regulation statuses.
const (
	StatusRunning  = "RUNNING"
	StatusFinished = "FINISHED"
)

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

// RegulationView is the API's form of a regulation.
type RegulationView struct {
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
	Stores map[string]StoreView `json:"stores"`
}

// StoreView is one store's progress on a regulation, in the API.
type StoreView struct {
	// Expected: the regulation is FINISHED only once this store reported on every subject.
	Expected         bool             `json:"expected"`
	SubjectsReported int              `json:"subjectsReported"`
	Counts           map[string]int64 `json:"counts"`
	// LastReportAt is when the store's latest report on the regulation was written.
	LastReportAt *time.Time `json:"lastReportAt,omitempty"`
}

// view is the regulation's API form with its first maxSubjects subject ids; expected are the
// stores that must report on every subject before it is FINISHED.
func (g *regulation) view(maxSubjects int, expected []string) RegulationView {
	v := RegulationView{ID: g.id, RegulationType: g.kind, SubjectType: "USER_ID", SubjectIDs: slices.Clone(g.order[:min(len(g.order), maxSubjects)]), SourceIDs: slices.Clone(g.sourceIDs),
		CreatedAt: g.createdAt, OverallStatus: StatusRunning, SubjectsTotal: g.requested, SubjectsProcessed: g.processed, NoticesSent: g.notices,
		Stores: map[string]StoreView{}}
	if v.SourceIDs == nil {
		v.SourceIDs = []string{}
	}
	for name, sp := range g.stores {
		at := sp.last
		v.Stores[name] = StoreView{SubjectsReported: sp.subjects, Counts: maps.Clone(sp.counts), LastReportAt: &at}
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
		v.OverallStatus = StatusFinished
		v.FinishedAt = &finishedAt
		ms := finishedAt.Sub(g.createdAt).Milliseconds()
		v.FinishedAfterMs = &ms
	}
	return v
}

// Regulations is every regulation. Safe for concurrent use.
type Regulations struct {
	mu    sync.Mutex
	byID  map[string]*regulation
	order []*regulation // by first sight
	// expected are the stores that must report on every subject (CONSOLE_REGULATION_STORES).
	expected []string
}

// NewRegulations is an empty view; a regulation is FINISHED once every store of expected
// reported on every subject.
func NewRegulations(expected []string) *Regulations {
	return &Regulations{byID: map[string]*regulation{}, expected: slices.Clone(expected)}
}

func (l *Regulations) get(id string) *regulation {
	g := l.byID[id]
	if g == nil {
		g = &regulation{id: id, subjects: map[string]*subject{}}
		l.byID[id] = g
		l.order = append(l.order, g)
	}
	return g
}

// Drop forgets a regulation whose records could not be written.
func (l *Regulations) Drop(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
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

// Requested records tracking.deletions requests of regulation id, made at at (in request
// order).
func (l *Regulations) Requested(id string, at time.Time, reqs ...schemas.DeletionRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.get(id)
	for i := range reqs {
		req := &reqs[i]
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
}

// Reported records a tracking.deletions.status record, a store's report (the router's
// DeletionStatus, st, is the router's report).
func (l *Regulations) Reported(rep schemas.DeletionReport, st *schemas.DeletionStatus) {
	l.mu.Lock()
	defer l.mu.Unlock()
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

// List is the regulations newest first, after the first skip, at most limit, each with its
// first maxSubjects subject ids; more says there are others after them. A regulation whose
// statuses were read before its request is not listed yet.
func (l *Regulations) List(skip, limit, maxSubjects int) (page []RegulationView, more bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	listed := Filter(backward(l.order), func(g *regulation) bool { return g.requested > 0 })
	gs, more := Paginate(Skip(listed, skip), limit)
	page = make([]RegulationView, len(gs))
	for i := range gs {
		page[i] = gs[i].view(maxSubjects, l.expected)
	}
	return page, more
}

// backward yields s's values last first.
func backward[T any](s []T) iter.Seq[T] {
	return func(yield func(T) bool) {
		for i := len(s) - 1; i >= 0; i-- {
			if !yield(s[i]) {
				return
			}
		}
	}
}

// Get is regulation id with its first maxSubjects subject ids; false when it is unknown, or
// only its statuses were read.
func (l *Regulations) Get(id string, maxSubjects int) (RegulationView, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.byID[id]
	if g == nil || g.requested == 0 {
		return RegulationView{}, false
	}
	return g.view(maxSubjects, l.expected), true
}
