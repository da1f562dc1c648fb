package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// The regulations' API: create one (its tracking.deletions records), list them, get one; and
// the console's own report on a regulation.

// MaxSubjects is the most subject ids one regulation may name (as Segment).
const MaxSubjects = 5000

// listedSubjects is how many subject ids a list of regulations shows of each (GET
// /v1/regulations/{id} shows them all).
const listedSubjects = 100

// regulationRequest is the body of POST /v1/regulations.
type regulationRequest struct {
	RegulationType string   `json:"regulationType"`
	SubjectType    string   `json:"subjectType"`
	SubjectIDs     []string `json:"subjectIds"`
	SourceIDs      []string `json:"sourceIds"`
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
	s.regulations.Requested(id, now.UTC(), reqs...)
	if err := s.producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		s.regulations.Drop(id)
		return "", fmt.Errorf("writing %s: %w", s.cfg.DeletionsTopic, err)
	}
	s.metrics.regulations.WithLabelValues(req.RegulationType).Inc()
	s.auditRegulation(ctx, id, req.RegulationType, len(subjects), req.SourceIDs)
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
	out, more := s.regulations.List(start, limit, listedSubjects)
	next := ""
	if more {
		next = strconv.Itoa(start + limit)
	}
	page := map[string]any{"data": out}
	if next != "" {
		page["nextCursor"] = next
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Service) getRegulation(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	v, ok := s.regulations.Get(id, MaxSubjects)
	if !ok {
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
