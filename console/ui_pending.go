package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// The destination page's "Pending retries" section (ui/templates/destination.pending.html): the
// messages waiting in the retry tiers, and "Retry now" for all, the selected or one of them
// (docs/console.md#pending-retries). It calls what the API calls (Service.retryNow).

// pendingRow is one waiting message of the section.
type pendingRow struct {
	pendingRecord
	Tier  string // the tier's delay: "10s", "1h"
	DueIn string // "in 42 s", or "due" once past
}

// pendingRows is the destination's waiting messages, soonest due first, and how many the view
// did not keep.
func (u *ui) pendingRows(id string) ([]pendingRow, int) {
	now := u.s.now()
	recs, notKept := u.s.pending.List(id, now)
	out := make([]pendingRow, 0, len(recs))
	for _, p := range recs {
		out = append(out, pendingRow{pendingRecord: p, Tier: strings.TrimPrefix(p.Topic, schemas.RetryTopicPrefix), DueIn: dueIn(p.DueAt, now)})
	}
	return out, notKept
}

// dueIn says when t comes: "in 42 s", "in 3 min", "in 2 h", or, once it passed, that the
// deliverer has it: parked until its endpoint's breaker lets a request through, or being
// attempted (docs/console.md#pending-retries).
func dueIn(t, now time.Time) string {
	d := t.Sub(now)
	switch {
	case t.IsZero():
		return ""
	case d <= 0:
		return "due: waiting for its endpoint, or in progress"
	case d < time.Minute:
		return fmt.Sprintf("in %d s", int(d.Seconds()+0.999))
	case d < time.Hour:
		return fmt.Sprintf("in %d min", int(d.Minutes()+0.999))
	}
	return fmt.Sprintf("in %d h", int(d.Hours()+0.999))
}

// retryPendingPage sends waiting messages now: one (button "one"), all ("retry" = "all") or
// the selected (pendingIds); then back to the page (post/redirect/get).
func (u *ui) retryPendingPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, ok := u.s.deps.Store.Snapshot().DestinationByID(id); !ok {
		u.fail(w, r, errNotFound("There is no destination %q.", id))
		return
	}
	var ids []string
	switch {
	case r.PostFormValue("one") != "":
		ids = []string{r.PostFormValue("one")}
	case r.PostFormValue("retry") == "all":
	default:
		if ids = r.PostForm["pendingIds"]; len(ids) == 0 {
			u.showError(w, r, tabPending, errInvalid("", "Select the messages to retry first (or retry them all)."), nil, nil)
			return
		}
	}
	res, err := u.s.retryNow(r.Context(), id, ids)
	if err != nil {
		u.showError(w, r, tabPending, err, nil, nil)
		return
	}
	done := fmt.Sprintf("Sent %s now: their attempts show in the delivery log within seconds; a message delivered now is not sent again by its tier.", plural(res.Sent, "message", "messages"))
	if res.Sent == 0 {
		done = "Nothing sent now: no selected message is waiting in a retry tier (delivered, dead-lettered or retried now already)."
	} else if len(res.NotPending) > 0 {
		done += fmt.Sprintf(" %s no longer waiting.", plural(len(res.NotPending), "message was", "messages were"))
	}
	if len(res.DueNow) > 0 {
		done += fmt.Sprintf(" Left to the tier (due now, or being attempted): %s.", plural(len(res.DueNow), "message", "messages"))
	}
	http.Redirect(w, r, "/destinations/"+url.PathEscape(id)+"?tab=pending&done="+url.QueryEscape(done)+"&flash="+u.flashMAC(done), http.StatusSeeOther)
}
