package console

import (
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

// The messages of a destination in the UI (docs/console.md#the-web-ui): the Messages tab
// (ui/templates/destination/messages.html: a search form and a table of messages, newest
// first, or the raw delivery log of attempts with ?view=attempts) and the message page
// (ui/templates/destination_message.html: what the message is, every attempt with the
// endpoint's answer, the body sent, its other destinations, and "Retry now" or "Replay").
// Both read the messages view as GET /v1/destinations/{id}/messages and GET
// /v1/messages/{messageId} do (Service.messagesQueryOf, Service.messagesPage), and the actions
// call what the Pending and Dead letters tabs call (Service.retryNow, Service.replay).

// messagesPerPage is how many messages a page of the Messages tab shows.
const messagesPerPage = 50

// msgSearch is the Messages tab's search form, as typed: its field names are the API's query
// parameters, so the same reader checks both (Service.messagesQueryOf).
type msgSearch struct {
	UserID, AnonymousID, Event, Type, Status, MessageID, Since string
}

// msgSearchOf reads the search form from a query.
func msgSearchOf(q url.Values) msgSearch {
	return msgSearch{UserID: q.Get("userId"), AnonymousID: q.Get("anonymousId"), Event: q.Get("event"), Type: q.Get("type"),
		Status: q.Get("status"), MessageID: q.Get("messageId"), Since: q.Get("since")}
}

// values is the search as a query (the empty fields left out).
func (f msgSearch) values() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"userId": f.UserID, "anonymousId": f.AnonymousID, "event": f.Event, "type": f.Type,
		"status": f.Status, "messageId": f.MessageID, "since": f.Since} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// Any reports whether the search filters anything.
func (f msgSearch) Any() bool { return len(f.values()) > 0 }

// messageRow is one message of the Messages tab's table.
type messageRow struct {
	views.Message
	User     string    // its userId, else its anonymousId
	Received time.Time // when ingest accepted it (else its first attempt)
	Href     string    // its message page
}

// messageHref is the address of the message page of messageID at destination id.
func messageHref(id, messageID string) string {
	return "/destinations/" + url.PathEscape(id) + "/messages/" + url.PathEscape(messageID)
}

// userOf is a message's user as the UI shows it: its userId, else its anonymousId.
func userOf(m *views.Message) string {
	if m.UserID != "" {
		return m.UserID
	}
	return m.AnonymousID
}

// receivedOf is when ingest accepted m, or its first attempt when that is not known.
func receivedOf(m *views.Message) time.Time {
	if m.ReceivedAt != nil {
		return *m.ReceivedAt
	}
	return m.FirstAttemptAt
}

// messagesTab fills the Messages tab's data: the raw delivery log with ?view=attempts, else a
// page of the messages the search form finds. A bad value is said on the page (the search
// form shows again with it), not answered 400.
func (u *ui) messagesTab(data *destinationData, id string, q url.Values, mask *piiMask) {
	if q.Get("view") == "attempts" {
		data.AttemptLog = true
		u.attemptLog(data, id, q, mask)
		return
	}
	data.PIIMasked = mask.masks()
	data.MessageStatuses, data.KeptMessages = views.MessageStatuses, u.s.cfg.MessagesPerDestination
	data.Search = msgSearchOf(q)
	mq, err := u.s.messagesQueryOf(q)
	if err == nil {
		err = mask.search(mq)
	}
	if err != nil {
		if mask.masks() { // what was typed is not shown either
			data.Search.UserID, data.Search.AnonymousID = "", ""
		}
		data.SearchError = "The search was not run: " + u.errorText(nil, err) + "."
		return
	}
	msgs, next := u.s.messagesPage(id, mq, messagesPerPage)
	for _, m := range mask.messages(msgs) {
		data.Messages = append(data.Messages, messageRow{Message: m, User: userOf(&m), Received: receivedOf(&m), Href: messageHref(id, m.MessageID)})
	}
	base := data.Search.values()
	base.Set("tab", tabMessages)
	data.SearchQuery = "/destinations/" + url.PathEscape(id) + "?" + base.Encode()
	if next != "" {
		base.Set("cursor", next)
		data.OlderHref = "/destinations/" + url.PathEscape(id) + "?" + base.Encode()
	}
	data.Cursor = q.Get("cursor")
}

// messageData is the message page's data.
type messageData struct {
	D        *schemas.Destination
	M        views.Message
	User     string
	Received time.Time
	Attempts []messageAttemptRow
	Others   []otherDelivery // the message's deliveries to its other destinations
	Body     string          // the body sent, when the console still has the message
	Pretty   string
	BodyNote string // why there is no body
	CanRetry bool   // it waits in a retry tier: "Retry now"
	Replay   bool   // it is dead-lettered: "Replay"
	Kept     int    // how many messages the view keeps per destination
	// PIIMasked: ids, the body and the answers are masked (docs/console.md#pii-access).
	PIIMasked bool
}

// messageAttemptRow is one attempt of the message page, its answer's headers in order.
type messageAttemptRow struct {
	views.MessageAttempt
	Headers [][2]string
}

// otherDelivery is the message at another destination: a link to its page there.
type otherDelivery struct {
	DestinationID, Status, Href string
}

// messagePage shows one message at one destination.
func (u *ui) messagePage(w http.ResponseWriter, r *http.Request) {
	u.renderMessage(w, r, http.StatusOK, "")
}

// renderMessage renders the message page of the request's destination and message, with an
// action's error.
func (u *ui) renderMessage(w http.ResponseWriter, r *http.Request, status int, errMsg string) {
	id, mid := r.PathValue("id"), r.PathValue("messageId")
	d, ok := u.s.deps.Store.Snapshot().DestinationByID(id)
	if !ok {
		u.fail(w, r, errNotFound("There is no destination %q.", id))
		return
	}
	mask := u.s.maskOf(r)
	data := &messageData{D: d, Kept: u.s.cfg.MessagesPerDestination, PIIMasked: mask.masks()}
	found := false
	for _, m := range mask.messages(u.s.messages.Message(mid)) {
		if m.DestinationID == id {
			data.M, found = m, true
			continue
		}
		data.Others = append(data.Others, otherDelivery{DestinationID: m.DestinationID, Status: m.Status, Href: messageHref(m.DestinationID, mid)})
	}
	if !found {
		// The id is not repeated: a deleted user's message ids are shown nowhere (docs/security.md).
		u.fail(w, r, errNotFound("This message is not in the messages view of destination %s (it keeps the last %d messages per destination; a deleted user's are forgotten).",
			id, u.s.cfg.MessagesPerDestination))
		return
	}
	slices.SortFunc(data.Others, func(a, b otherDelivery) int { return strings.Compare(a.DestinationID, b.DestinationID) })
	data.User, data.Received = userOf(&data.M), receivedOf(&data.M)
	for _, a := range data.M.Attempts {
		row := messageAttemptRow{MessageAttempt: a}
		for _, name := range sortedKeys(a.ResponseHeaders) {
			row.Headers = append(row.Headers, [2]string{name, a.ResponseHeaders[name]})
		}
		data.Attempts = append(data.Attempts, row)
	}
	data.CanRetry = data.M.Status == views.StatusRetrying
	data.Replay = data.M.Status == views.StatusDeadLettered
	// The body as the attempt page shows it: rebuilt from the source's recent events, which
	// hold no event of a deleted user (docs/console.md#the-web-ui).
	if body := u.deliveredBody(d, mid); body != nil && data.M.Status != views.StatusFiltered {
		body = mask.json(body)
		data.Body, data.Pretty = string(body), fmtPretty(body)
	} else if data.M.Status == views.StatusFiltered {
		data.BodyNote = "Nothing was sent: the message was dropped before this destination."
	} else {
		data.BodyNote = fmt.Sprintf("The body is no longer in the console's memory (it keeps the last %d events per source).", u.s.cfg.RecentEvents)
	}
	u.render(w, r, status, "destination_message", page{Title: "Message " + mid + " to " + id, Nav: "destinations", Error: errMsg, Data: data})
}

// retryMessagePage sends the message now (the Pending tab's "Retry now"), then back to its page.
func (u *ui) retryMessagePage(w http.ResponseWriter, r *http.Request) {
	id, mid := r.PathValue("id"), r.PathValue("messageId")
	res, err := u.s.retryNow(r.Context(), id, []string{mid})
	if err != nil {
		u.renderMessage(w, r, statusOf(err), u.errorText(r, err))
		return
	}
	done := "Sent now: its attempt shows below within seconds; if it is delivered, its tier does not send it again."
	switch {
	case len(res.DueNow) > 0:
		done = "Left to its tier: it is due now, or being attempted."
	case res.Sent == 0:
		done = "Nothing sent: the message is no longer waiting in a retry tier (delivered, dead-lettered or retried now already)."
	}
	u.redirect(w, r, messageHref(id, mid), done)
}

// replayMessagePage replays the dead-lettered message (the Dead letters tab's "Replay"), then
// back to its page.
func (u *ui) replayMessagePage(w http.ResponseWriter, r *http.Request) {
	id, mid := r.PathValue("id"), r.PathValue("messageId")
	if _, ok := u.s.deps.Store.Snapshot().DestinationByID(id); !ok {
		u.fail(w, r, errNotFound("There is no destination %q.", id))
		return
	}
	ids, sk, err := u.s.replay(r.Context(), id, replayRequest{MessageIDs: []string{mid}})
	if err != nil {
		u.renderMessage(w, r, statusOf(err), u.errorText(r, err))
		return
	}
	done := "Replayed: it is delivered again with a fresh retry window; its new attempts show below."
	switch {
	case len(sk.ids) > 0:
		done = "Not replayed: it is a message of a " + sk.reason() + "."
	case len(ids) == 0:
		done = "Nothing replayed: the dead-letter queue holds no copy of this message."
	}
	u.redirect(w, r, messageHref(id, mid), done)
}

// errorText is an error as a page says it: an unexpected one is logged, not shown.
func (u *ui) errorText(r *http.Request, err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Message
	}
	ev := u.s.logger.Error().Err(err)
	if r != nil {
		ev = ev.Str("path", r.URL.Path)
	}
	ev.Msg("page failed")
	return "Something failed: see the console's log"
}
