package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The destination page's Replay tab (ui/templates/destination/replay.html,
// docs/console.md#replays): a form that counts the messages of a time range and filter first
// (a dry run), then starts their replay; and the destination's replays with their progress and
// a cancel button. It calls what the API calls (replays_api.go); every form is POST, then a
// redirect to the tab (post/redirect/get), with the CSRF token.

// replayForm is the form's values, as typed (from and to: an RFC 3339 time or a duration back
// from now, as ?since= takes).
type replayForm struct {
	From, To, Type, Event, UserID, SourceID, MaxPerSecond, URL string
	// Counted is set once the form's values were counted: the Start button shows then.
	Counted bool
}

// replayTab is the tab's data.
type replayTab struct {
	Form    replayForm
	Types   []string
	Replays []replayView
}

// replayFormOf reads the form from values (a POST's, or the redirect's query).
func replayFormOf(v url.Values) replayForm {
	return replayForm{From: v.Get("from"), To: v.Get("to"), Type: v.Get("type"), Event: v.Get("event"), UserID: v.Get("userId"),
		SourceID: v.Get("sourceId"), MaxPerSecond: v.Get("maxPerSecond"), URL: v.Get("url"), Counted: v.Get("counted") == "1"}
}

// values are the form's values as a query (the redirect's).
func (f replayForm) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"from": f.From, "to": f.To, "type": f.Type, "event": f.Event, "userId": f.UserID, "sourceId": f.SourceID, "maxPerSecond": f.MaxPerSecond, "url": f.URL} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// replayTabOf is the tab of destination id for the query.
func (u *ui) replayTabOf(id string, q url.Values, mask *piiMask) *replayTab {
	t := &replayTab{Form: replayFormOf(q), Types: replayTypes}
	if t.Form.From == "" {
		t.Form.From = "1h"
	}
	for _, p := range u.s.replayRuns.all(id) {
		t.Replays = append(t.Replays, mask.replay(p.view()))
	}
	return t
}

// request is the API request of the form, for destination id.
func (f replayForm) request(id string, now time.Time, dryRun bool) (rangeReplayRequest, error) {
	req := rangeReplayRequest{DestinationID: id, DryRun: dryRun, URL: f.URL,
		Filter: replayFilter{Type: f.Type, Event: f.Event, UserID: f.UserID, SourceID: f.SourceID}}
	for _, t := range []struct {
		name, value string
		dst         *string
	}{{"from", f.From, &req.From}, {"to", f.To, &req.To}} {
		if t.value == "" {
			continue
		}
		at, err := parseSince(t.value, now)
		if err != nil {
			return req, errInvalid(t.name, "%s: %s, got %q", t.name, err, t.value)
		}
		*t.dst = at.UTC().Format(time.RFC3339Nano)
	}
	if f.MaxPerSecond != "" {
		n, err := strconv.Atoi(f.MaxPerSecond)
		if err != nil {
			return req, errInvalid("maxPerSecond", "maxPerSecond: a whole number of messages a second, got %q", f.MaxPerSecond)
		}
		req.MaxPerSecond = n
	}
	return req, nil
}

// replayPage counts ("action" = "count") or starts ("start") the replay of the form, then
// goes back to the tab with the count or the replay's id.
func (u *ui) replayPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f := replayFormOf(r.PostForm)
	start := r.PostFormValue("action") == "start"
	fail := func(err error) { // the tab again, with the form as sent and the error
		var ae *apiError
		if !errors.As(err, &ae) {
			u.fail(w, r, err)
			return
		}
		data, derr := u.destinationData(r.Context(), id, url.Values{"tab": {tabReplay}})
		if derr != nil {
			u.fail(w, r, derr)
			return
		}
		data.Replay.Form = f
		u.renderDestination(w, r, ae.Status, data, ae.Message)
	}
	req, err := f.request(id, u.s.now(), !start)
	if err == nil {
		err = u.s.maskOf(r).replayRequest(req.Filter)
	}
	if err != nil {
		fail(err)
		return
	}
	q, err := u.s.replayQueryOf(req)
	if err != nil {
		fail(err)
		return
	}
	var done string
	back := f.values()
	back.Set("tab", tabReplay)
	if start {
		p, err := u.s.startReplay(r.Context(), q)
		if err != nil {
			fail(err)
			return
		}
		v := p.view()
		done = fmt.Sprintf("Replay %s started: %s, at most %d a second. Its progress is below.", v.ID, plural(v.Matched, "message", "messages"), v.MaxPerSecond)
	} else {
		n, err := u.s.scanReplay(r.Context(), q, nil)
		if err != nil {
			fail(err)
			return
		}
		done = fmt.Sprintf("%s match: check the range and filter, then start the replay.", plural(n, "message", "messages"))
		back.Set("counted", "1")
	}
	back.Set("done", done)
	back.Set("flash", u.flashMAC(done))
	http.Redirect(w, r, "/destinations/"+url.PathEscape(id)+"?"+back.Encode(), http.StatusSeeOther)
}

// cancelReplayPage cancels one of the destination's replays, then goes back to the tab.
func (u *ui) cancelReplayPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p := u.s.replayRuns.get(r.PathValue("replayId"))
	if p == nil || p.destinationID != id {
		u.fail(w, r, errNotFound("There is no replay %q of destination %q.", r.PathValue("replayId"), id))
		return
	}
	u.s.stopReplay(p)
	u.s.auditReplayCancelled(r.Context(), p)
	done := "Replay " + p.ID + " cancelled: no more of its messages are sent (those sent are delivered)."
	http.Redirect(w, r, "/destinations/"+url.PathEscape(id)+"?tab="+tabReplay+"&done="+url.QueryEscape(done)+"&flash="+u.flashMAC(done), http.StatusSeeOther)
}
