package console

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-cdp/tributary/console/internal/views"
)

// The messages API (docs/console.md#messages): a destination's messages, each with its
// attempts and the endpoint's answers, found by user, event, type, status or id; and one
// message across every destination it went to.

// message is one message's delivery to one destination, as the API answers it.
type message = views.Message

// maxQueryValue bounds a messages filter's value (ids and event names are far shorter).
const maxQueryValue = 1024

// messagesQuery reads the filters of GET /v1/destinations/{id}/messages.
func (s *Service) messagesQuery(r *http.Request) (views.MessageQuery, error) {
	return s.messagesQueryOf(r.URL.Query())
}

// messagesQueryOf reads the messages' filters from a query: the API's and the Messages tab's
// search form's (ui_messages.go), which has the same field names.
func (s *Service) messagesQueryOf(q url.Values) (views.MessageQuery, error) {
	var mq views.MessageQuery
	for _, f := range []struct {
		name string
		dst  *string
	}{{"messageId", &mq.MessageID}, {"userId", &mq.UserID}, {"anonymousId", &mq.AnonymousID}, {"event", &mq.Event}, {"type", &mq.Type}, {"status", &mq.Status}} {
		v := q.Get(f.name)
		if len(v) > maxQueryValue {
			return mq, errInvalid(f.name, "%s: at most %d bytes, got %d", f.name, maxQueryValue, len(v))
		}
		*f.dst = v
	}
	if mq.Status != "" && !slices.Contains(views.MessageStatuses, mq.Status) {
		return mq, errInvalid("status", "status: must be one of %s, got %q", strings.Join(views.MessageStatuses, ", "), mq.Status)
	}
	if v := q.Get("since"); v != "" {
		since, err := parseSince(v, s.now())
		if err != nil {
			return mq, errInvalid("since", "since: %s, got %q", err, v)
		}
		mq.Since = since
	}
	if c := q.Get("cursor"); c != "" {
		n, err := strconv.ParseUint(c, 10, 64)
		if err != nil || n == 0 {
			return mq, errInvalid("cursor", "cursor: not a cursor of this API: %q", c)
		}
		mq.Before = n
	}
	return mq, nil
}

// sinceError says what ?since= takes.
type sinceError struct{}

func (sinceError) Error() string {
	return "must be a time (RFC 3339, e.g. 2026-11-27T10:00:00Z) or a duration back from now (e.g. 15m, 2h)"
}

// parseSince reads ?since=: an RFC 3339 time, or a positive duration back from now.
func parseSince(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, sinceError{}
}

// destinationMessages answers the destination's messages, newest first, in the usual envelope:
// ?userId=, ?anonymousId=, ?event=, ?type=, ?status=, ?messageId= and ?since= filter,
// ?cursor= (the nextCursor of the previous page) pages, ?limit= sizes a page (50). Without the
// PII grant the messages are masked and a search by user or anonymous id is refused
// (docs/console.md#pii-access).
func (s *Service) destinationMessages(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, ok := s.deps.Store.Snapshot().DestinationByID(id); !ok {
		return errNotFound("no destination %q", id)
	}
	q, err := s.messagesQuery(r)
	if err != nil {
		return err
	}
	mask := s.maskOf(r)
	if err := mask.search(q); err != nil {
		return err
	}
	limit, err := pageLimit(r, 50)
	if err != nil {
		return err
	}
	out, next := s.messagesPage(id, q, limit)
	page := map[string]any{"data": mask.messages(out)}
	if next != "" {
		page["nextCursor"] = next
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// messagesPage is a page of the destination's messages, newest first (views.Messages.Page), and
// the cursor of the next page ("" for the last). The API and the UI page with it.
func (s *Service) messagesPage(id string, q views.MessageQuery, limit int) (page []message, next string) {
	page, more := s.messages.Page(id, q, limit)
	if more {
		next = strconv.FormatUint(page[len(page)-1].Seq, 10)
	}
	return page, next
}

// getMessage answers one message, for every destination it went to (by destination id).
func (s *Service) getMessage(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("messageId")
	out := s.messages.Message(id)
	if len(out) == 0 {
		return errNotFound("no message %q in the messages view (it keeps the last %d messages per destination)", id, s.cfg.MessagesPerDestination)
	}
	writeData(w, http.StatusOK, s.maskOf(r).messages(out))
	return nil
}
