package console

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/schemas"
)

// The overview: what came in per source and went out per destination in the last hour, the
// DLQ sizes and the retry tiers' backlog, problem spots first, each a link to what it names.
// A destination is judged by its messages, not its attempts (judge).

// sourceRow is a source on the overview.
type sourceRow struct {
	ID, Name           string
	Accepted, Rejected uint64
}

// destinationRow is a destination on the overview and the destinations list.
type destinationRow struct {
	ID, Name string
	Enabled  bool
	Sources  []string
	URLs     int
	Stats    stats             // its attempts, last hour
	Health   views.HealthStats // its messages, last hour
	DLQ      int
	// Failing: its messages are not delivered (judge); Why says how.
	Failing bool
	Why     string
	// URLProblems are its URLs that fail while another delivers its messages.
	URLProblems []problem
	// AutoDisable is its auto-disable problem (notices.go), "" when none.
	AutoDisable string
}

// FailedAttempts is how many of its attempts failed in the last hour.
func (d destinationRow) FailedAttempts() uint64 { return d.Stats.Attempts - d.Stats.Successes }

// problem is a line of the overview's problems, a link to what it names.
type problem struct {
	Text, Href string
}

// overviewData is the overview page's data.
type overviewData struct {
	Problems     []problem
	Sources      []sourceRow
	Destinations []destinationRow
	Tiers        []tierRow
	TiersError   string
}

// destinationRows is every destination with its last hour's counters and DLQ size, judged by
// its messages.
func (u *ui) destinationRows() []destinationRow {
	var out []destinationRow
	for _, d := range u.s.deps.Store.Snapshot().Destinations() {
		row := destinationRow{ID: d.ID, Name: d.Name, Enabled: d.IsEnabled(), Sources: d.Sources, URLs: len(d.Settings.Webhooks),
			Stats: u.s.statsOf(d.ID, time.Hour, time.Minute), Health: u.s.healthOf(d, time.Hour), DLQ: u.s.dlq.Pending(d.ID)}
		row.Failing, row.Why = judge(row.Health, "1h")
		row.AutoDisable = u.s.autoDisableProblem(d, u.s.now())
		if !row.Failing {
			row.URLProblems = urlProblems(d, row.Health, "1h")
		}
		out = append(out, row)
	}
	return out
}

// failingRate: a destination that delivered less than this share of the messages it finished
// with (delivered or dead-lettered) is failing.
const failingRate = 0.95

// judge says whether a destination is failing — its messages are not delivered — by its
// messages of the window (1h or 24h), and how: it delivered under failingRate of those it
// finished with (the others were dead-lettered), or more of them wait for a retry than were
// delivered. Failed attempts alone do not make it fail: a message is delivered as soon as one
// URL answers 2xx (urlProblems names the URLs that fail).
func judge(h views.HealthStats, window string) (failing bool, why string) {
	m := h.Messages
	switch {
	case h.DeliveryRate != nil && *h.DeliveryRate < failingRate:
		return true, fmtPct(h.DeliveryRate) + " of its messages were delivered in the last " + windowWord(window) + " (" + fmtCount(m.Delivered) +
			" delivered, " + fmtCount(m.DeadLettered) + " dead-lettered)"
	case m.Retrying > m.Delivered:
		return true, plural(m.Retrying, "message waits", "messages wait") + " for a retry and " + plural(m.Delivered, "was", "were") +
			" delivered in the last " + windowWord(window)
	}
	return false, ""
}

// urlFailures says, by error class, what a failing URL does.
var urlFailures = map[string]string{
	"connection":      "refuses connections",
	"timeout":         "times out",
	"status_5xx":      "answers 5xx",
	"status_408":      "answers 408 (request timeout)",
	"status_429":      "answers 429 (too many requests)",
	"status_4xx":      "refuses the messages (4xx)",
	"tls":             "has a certificate the deliverer refuses",
	"blocked_address": "resolves to an address the deliverer may not reach",
	"invalid_url":     "is no valid URL",
	"invalid_request": "cannot be sent the request",
}

// urlProblems are the destination's URLs under failingRate of whose attempts succeeded in the
// window (judge says the destination's messages were delivered all the same: by another URL,
// or on a retry), each named by its place in the destination's webhooks ("URL 2") and what it
// does most ("refuses connections").
func urlProblems(d *schemas.Destination, h views.HealthStats, window string) []problem {
	var out []problem
	for _, us := range h.URLs {
		if us.Attempts == 0 || float64(us.Successes)/float64(us.Attempts) >= failingRate {
			continue
		}
		worst, n := "", uint64(0)
		for class, c := range us.Failures {
			if c > n || (c == n && class < worst) {
				worst, n = class, c
			}
		}
		does, ok := urlFailures[worst]
		if !ok {
			does = "fails (" + worst + ")"
		}
		name := "A former URL"
		if i := urlIndex(d, us.URL, -1); i >= 0 {
			name = "URL " + strconv.Itoa(i+1)
		}
		text := name + " of " + d.ID + " " + does + ": " + fmtCount(us.Attempts-us.Successes) + " of its " + plural(us.Attempts, "attempt", "attempts") +
			" failed in the last " + windowWord(window)
		switch {
		case slices.ContainsFunc(h.URLs, func(o views.URLStats) bool { return o.URL != us.URL && o.Successes > 0 }):
			text += "; its messages were delivered by another URL"
		case h.DeliveredAfterRetries > 0:
			text += "; its messages were delivered after retries"
		}
		out = append(out, problem{Text: text + ".", Href: destinationLink(d.ID, "urls")})
	}
	return out
}

// destinationLink is a link to a section of a destination's health tab.
func destinationLink(id, section string) string {
	return destinationTab(id, tabHealth) + "#" + section
}

func (u *ui) overview(w http.ResponseWriter, r *http.Request) {
	data := overviewData{}
	now := u.s.now()
	for _, src := range u.s.deps.Store.Snapshot().Sources() {
		row := sourceRow{ID: src.ID, Name: src.Name}
		row.Accepted, row.Rejected = u.s.events.LastHour(src.ID, now)
		data.Sources = append(data.Sources, row)
	}
	data.Destinations = u.destinationRows()
	// Problem spots first: failing destinations, dead letters, rejecting sources.
	slices.SortStableFunc(data.Destinations, func(a, b destinationRow) int {
		return problemRank(b) - problemRank(a)
	})
	for _, d := range data.Destinations {
		if d.AutoDisable != "" {
			data.Problems = append(data.Problems, problem{d.AutoDisable, destinationTab(d.ID, tabHealth)})
		}
		if d.Failing {
			data.Problems = append(data.Problems, problem{"Destination " + d.ID + " is failing: " + d.Why + ".", destinationTab(d.ID, tabHealth)})
		}
		data.Problems = append(data.Problems, d.URLProblems...)
		if d.DLQ > 0 {
			data.Problems = append(data.Problems, problem{"Destination " + d.ID + " has " + plural(d.DLQ, "message") + " in its dead-letter queue.",
				destinationTab(d.ID, tabDLQ)})
		}
	}
	slices.SortStableFunc(data.Sources, func(a, b sourceRow) int { return int(b.Rejected) - int(a.Rejected) })
	for _, s := range data.Sources {
		if s.Rejected > 0 {
			data.Problems = append(data.Problems, problem{"Source " + s.ID + " had " + plural(s.Rejected, "message") + " rejected in the last hour.",
				"/sources/" + url.PathEscape(s.ID) + "#debugger"})
		}
	}
	tiers, err := u.s.tiers.Rows() // as runTierLag last read it: a page never waits for Kafka
	if err != nil {
		data.TiersError = "The retry tiers' backlog is unknown: " + err.Error()
	}
	data.Tiers = tiers
	u.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Data: data})
}

// problemRank orders destinations: failing, then with dead letters, then with a failing URL,
// then the rest.
func problemRank(d destinationRow) int {
	switch {
	case d.AutoDisable != "":
		return 4
	case d.Failing:
		return 3
	case d.DLQ > 0:
		return 2
	case len(d.URLProblems) > 0:
		return 1
	}
	return 0
}
