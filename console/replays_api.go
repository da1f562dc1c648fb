package console

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// The replays API (docs/console.md#replays, docs/delivery.md#replay): POST /v1/replays counts
// (dryRun) or starts a replay; GET /v1/replays lists them, GET /v1/replays/{id} is one's
// progress, DELETE /v1/replays/{id} (or POST /v1/replays/{id}/cancel) cancels it.

// rangeReplayRequest is the body of POST /v1/replays.
type rangeReplayRequest struct {
	DestinationID string       `json:"destinationId"`
	From          string       `json:"from"`
	To            string       `json:"to"`
	Filter        replayFilter `json:"filter"`
	DryRun        bool         `json:"dryRun"`
	MaxPerSecond  int          `json:"maxPerSecond"`
	URL           string       `json:"url"`
}

// replayTypes are the message types a filter may name.
var replayTypes = []string{schemas.TypeIdentify, schemas.TypeTrack, schemas.TypePage, schemas.TypeScreen, schemas.TypeGroup, schemas.TypeAlias}

// replayQueryOf checks a replay request against the config: every problem is a 400 naming its
// field.
func (s *Service) replayQueryOf(req rangeReplayRequest) (*replayQuery, error) {
	if req.DestinationID == "" {
		return nil, errInvalid("destinationId", "destinationId: required")
	}
	snap := s.deps.Store.Snapshot()
	dest, ok := snap.DestinationByID(req.DestinationID)
	if !ok {
		return nil, errInvalid("destinationId", "destinationId: no destination %q", req.DestinationID)
	}
	if !dest.IsEnabled() {
		return nil, errInvalid("destinationId", "destinationId: destination %q is disabled: enable it first (the deliverer dead-letters a disabled destination's messages)", dest.ID)
	}
	q := &replayQuery{dest: dest, filter: req.Filter, url: req.URL, topic: s.cfg.DeliveriesTopic, rate: req.MaxPerSecond,
		sources: map[string]bool{}, blocked: map[string][]string{}}
	if req.From == "" {
		return nil, errInvalid("from", "from: required (RFC 3339, e.g. 2026-11-27T10:00:00Z)")
	}
	var err error
	if q.from, err = time.Parse(time.RFC3339Nano, req.From); err != nil {
		return nil, errInvalid("from", "from: must be an RFC 3339 time (e.g. 2026-11-27T10:00:00Z), got %q", req.From)
	}
	q.to = s.now()
	if req.To != "" {
		if q.to, err = time.Parse(time.RFC3339Nano, req.To); err != nil {
			return nil, errInvalid("to", "to: must be an RFC 3339 time (e.g. 2026-11-27T10:00:00Z), got %q", req.To)
		}
	}
	if q.from.After(q.to) {
		return nil, errInvalid("from", "from (%s) is after to (%s)", req.From, schemas.FormatTimestamp(q.to))
	}
	f := req.Filter
	if f.Type != "" && !slices.Contains(replayTypes, f.Type) {
		return nil, errInvalid("filter.type", "filter.type: must be one of %s, got %q", strings.Join(replayTypes, ", "), f.Type)
	}
	for _, v := range []struct{ name, value string }{{"filter.type", f.Type}, {"filter.event", f.Event}, {"filter.userId", f.UserID}, {"filter.sourceId", f.SourceID}} {
		if len(v.value) > maxQueryValue {
			return nil, errInvalid(v.name, "%s: at most %d bytes, got %d", v.name, maxQueryValue, len(v.value))
		}
	}
	if f.SourceID != "" && !slices.Contains(dest.Sources, f.SourceID) {
		return nil, errInvalid("filter.sourceId", "filter.sourceId: source %q is not connected to destination %q (a replay sends what the router would)", f.SourceID, dest.ID)
	}
	for _, id := range dest.Sources {
		src, ok := snap.SourceByID(id)
		if !ok || (f.SourceID != "" && id != f.SourceID) {
			continue
		}
		q.sources[id] = true
		if src.TrackingPlan != nil {
			q.blocked[id] = src.TrackingPlan.BlockedEvents
		}
	}
	for _, v := range []struct {
		value string
		dst   *[]byte
	}{{f.Type, &q.typ}, {f.Event, &q.event}, {f.UserID, &q.userID}} {
		if v.value != "" {
			*v.dst = []byte(v.value)
		}
	}
	switch {
	case q.rate == 0:
		q.rate = defaultReplayRate
	case q.rate < 0 || q.rate > maxReplayRate:
		return nil, errInvalid("maxPerSecond", "maxPerSecond: must be between 1 and %d, got %d", maxReplayRate, q.rate)
	}
	if q.url != "" {
		if err := schemas.CheckWebhookURL(q.url); err != nil {
			return nil, errInvalid("url", "url: %v", err)
		}
	}
	return q, nil
}

// createReplay counts (dryRun) or starts a replay; by user id, only with PII access
// (docs/console.md#pii-access).
func (s *Service) createReplay(w http.ResponseWriter, r *http.Request) error {
	var req rangeReplayRequest
	if err := decodeJSON(w, r, &req, false); err != nil {
		return err
	}
	if err := s.maskOf(r).replayRequest(req.Filter); err != nil {
		return err
	}
	q, err := s.replayQueryOf(req)
	if err != nil {
		return err
	}
	if req.DryRun {
		n, err := s.scanReplay(r.Context(), q, nil)
		if err != nil {
			return err
		}
		writeData(w, http.StatusOK, map[string]int64{"matched": n})
		return nil
	}
	p, err := s.startReplay(r.Context(), q)
	if err != nil {
		return err
	}
	v := p.view()
	writeData(w, http.StatusCreated, map[string]any{"replayId": v.ID, "matched": v.Matched})
	return nil
}

// startReplay counts q's messages, then starts the replay in the background (it runs until it
// ends, is cancelled, or the console stops).
func (s *Service) startReplay(ctx context.Context, q *replayQuery) (*replay, error) {
	n, err := s.scanReplay(ctx, q, nil)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	p := &replay{ID: newReplayID(), destinationID: q.dest.ID, url: schemas.RedactURL(q.url), from: q.from, to: q.to, filter: q.filter,
		rate: q.rate, matched: n, state: replayRunning, startedAt: s.now(), finished: map[string]bool{}, cancel: cancel}
	if !s.replayRuns.add(p) {
		cancel()
		return nil, errReplayTooMany
	}
	s.replayWG.Add(1)
	go func() {
		defer s.replayWG.Done()
		defer cancel()
		go func() { // the console stopping cancels it
			select {
			case <-s.stopping:
				cancel()
			case <-runCtx.Done():
			}
		}()
		s.runReplay(runCtx, p, q)
	}()
	s.logger.Info().Str("replay_id", p.ID).Str("destination_id", q.dest.ID).Int64("matched", n).Int("max_per_second", q.rate).Msg("replay started")
	s.audit(ctx, actionReplayCreate, schemas.AuditObject{Kind: "replay", ID: p.ID}, nil, p.view())
	return p, nil
}

// listReplays answers the replays, newest first (?destinationId= narrows).
func (s *Service) listReplays(w http.ResponseWriter, r *http.Request) error {
	out := []replayView{}
	for _, p := range s.replayRuns.all(r.URL.Query().Get("destinationId")) {
		out = append(out, p.view())
	}
	writeData(w, http.StatusOK, s.maskOf(r).replays(out))
	return nil
}

// getReplay answers one replay's progress.
func (s *Service) getReplay(w http.ResponseWriter, r *http.Request) error {
	p := s.replayRuns.get(r.PathValue("id"))
	if p == nil {
		return errNotFound("no replay %q (the console keeps its last %d replays, until it restarts)", r.PathValue("id"), keptReplays)
	}
	writeData(w, http.StatusOK, s.maskOf(r).replay(p.view()))
	return nil
}

// cancelReplay cancels a running replay: no more deliveries are written (those written are
// delivered). Cancelling a finished replay changes nothing.
func (s *Service) cancelReplay(w http.ResponseWriter, r *http.Request) error {
	p := s.replayRuns.get(r.PathValue("id"))
	if p == nil {
		return errNotFound("no replay %q", r.PathValue("id"))
	}
	s.stopReplay(p)
	s.auditReplayCancelled(r.Context(), p)
	writeData(w, http.StatusOK, s.maskOf(r).replay(p.view()))
	return nil
}

// stopReplay cancels p and marks it cancelled at once.
func (s *Service) stopReplay(p *replay) {
	p.end(replayCancelled, "", s.now())
	p.cancel()
	s.logger.Info().Str("replay_id", p.ID).Msg("replay cancelled")
}
