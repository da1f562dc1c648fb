package console

import (
	"net/http"
	"net/url"
	"slices"
	"time"
)

// The overview: what came in per source and went out per destination in the last hour, the
// DLQ sizes and the retry tiers' backlog, problem spots first.

// sourceRow is a source on the overview.
type sourceRow struct {
	ID, Name           string
	Accepted, Rejected uint64
}

// destinationRow is a destination on the overview and the destinations list.
type destinationRow struct {
	ID, Name    string
	Enabled     bool
	Sources     []string
	URLs        int
	Stats       stats // last hour
	DLQ         int
	Failing     bool // under 95 % success in the last hour
	ProblemText string
}

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

// destinationRows is every destination with its last hour's counters and DLQ size.
func (u *ui) destinationRows() []destinationRow {
	var out []destinationRow
	for _, d := range u.s.deps.Store.Snapshot().Destinations() {
		row := destinationRow{ID: d.ID, Name: d.Name, Enabled: d.IsEnabled(), Sources: d.Sources, URLs: len(d.Settings.Webhooks),
			Stats: u.s.statsOf(d.ID, time.Hour, time.Minute), DLQ: u.s.dlq.Pending(d.ID)}
		if rate := row.Stats.SuccessRate; rate != nil && *rate < 0.95 {
			row.Failing = true
		}
		out = append(out, row)
	}
	return out
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
		switch {
		case d.Failing:
			data.Problems = append(data.Problems, problem{"Destination " + d.ID + " is failing: " + fmtPct(d.Stats.SuccessRate) + " of its attempts succeeded in the last hour.",
				destinationTab(d.ID, tabHealth)})
		}
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

// problemRank orders destinations: failing, then with dead letters, then the rest.
func problemRank(d destinationRow) int {
	switch {
	case d.Failing:
		return 2
	case d.DLQ > 0:
		return 1
	}
	return 0
}
