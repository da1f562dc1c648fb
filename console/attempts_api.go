package console

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/tributary-cdp/tributary/console/internal/views"
)

// The delivery log's API: a destination's attempts (paged) and stats, a message's attempts.

// pageLimit reads ?limit= (default def, at most views.MaxPage).
func pageLimit(r *http.Request, def int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > views.MaxPage {
		return 0, errInvalid("limit", "limit: must be a number from 1 to %d, got %q", views.MaxPage, v)
	}
	return n, nil
}

// attemptsPage is a page of the destination's delivery log, newest first (views.Attempts.Page):
// the attempts before the cursor before (the previous page's next cursor; math.MaxUint64 for
// the first page) that match status, and the cursor of the next page ("" for the last). The
// API and the UI page with it.
func (s *Service) attemptsPage(id string, before uint64, status string, limit int) (page []attempt, next string) {
	page, more := s.attempts.Page(id, before, status, limit)
	if more {
		next = strconv.FormatUint(page[len(page)-1].Seq, 10)
	}
	return page, next
}

// destinationAttempts answers the destination's attempts, newest first: ?status= filters,
// ?cursor= (the nextCursor of the previous page) pages, ?limit= sizes a page (50).
func (s *Service) destinationAttempts(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, ok := s.deps.Store.Snapshot().DestinationByID(id); !ok {
		return errNotFound("no destination %q", id)
	}
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && !slices.Contains(statusFilters, status) {
		return errInvalid("status", "status: must be one of %v, got %q", statusFilters, status)
	}
	limit, err := pageLimit(r, 50)
	if err != nil {
		return err
	}
	var before uint64 = math.MaxUint64
	if c := q.Get("cursor"); c != "" {
		if before, err = strconv.ParseUint(c, 10, 64); err != nil {
			return errInvalid("cursor", "cursor: not a cursor of this API: %q", c)
		}
	}
	out, next := s.attemptsPage(id, before, status, limit)
	page := map[string]any{"data": s.maskOf(r).attempts(out)}
	if next != "" {
		page["nextCursor"] = next
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// messageAttempts answers every attempt of one message the log holds, oldest first, across
// destinations, URLs and tiers.
func (s *Service) messageAttempts(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("messageId")
	out := s.attempts.OfMessage(id)
	if len(out) == 0 {
		return errNotFound("no attempt of message %q in the log (it keeps the last %d attempts per destination)", id, s.cfg.AttemptsPerDestination)
	}
	writeData(w, http.StatusOK, s.maskOf(r).attempts(out))
	return nil
}

// destinationStats answers the destination's counters over ?window=1h (per minute) or 24h
// (per 10 minutes): its attempts', and its messages' (health_api.go).
func (s *Service) destinationStats(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	d, ok := s.deps.Store.Snapshot().DestinationByID(id)
	if !ok {
		return errNotFound("no destination %q", id)
	}
	name, window, step, err := statsWindow(r)
	if err != nil {
		return err
	}
	out := statsAnswer{s.statsOf(id, window, step), s.healthOf(d, window)}
	out.Window = name
	writeData(w, http.StatusOK, out)
	return nil
}

// statsOf is the destination's counters over the last window, one point per step.
func (s *Service) statsOf(id string, window, step time.Duration) stats {
	return s.attempts.Stats(id, s.now(), window, step)
}
