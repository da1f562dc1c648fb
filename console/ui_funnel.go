package console

import (
	"html"
	"html/template"
	"strings"

	"github.com/tributary-cdp/tributary/console/internal/views"
)

// The delivery funnel on a destination's page (ui/templates/funnel.html, its own template so
// that any section of the page can hold it): one bar per stage, drawn server-side in SVG as the
// charts are (ui_chart.go: no script, presentation attributes only, the CSP forbids style
// attributes), then each stage's reasons with their sample message ids.

// funnelView is the funnel template's data.
type funnelView struct {
	DestinationID string
	Window        string // 1h or 24h
	F             views.Funnel
	SVG           template.HTML
	Stages        []funnelRow
}

// funnelRow is one stage of the funnel as shown.
type funnelRow struct {
	Name, Class string
	Count       uint64
	Share       *float64 // of the messages received; nil when none was
	Reasons     []views.FunnelReason
}

// funnelOf is a destination's funnel as the template shows it.
func funnelOf(id, window string, f views.Funnel) funnelView {
	v := funnelView{DestinationID: id, Window: window, F: f}
	stage := func(name, class string, st views.FunnelStage) funnelRow {
		r := funnelRow{Name: name, Class: class, Count: st.Count, Reasons: st.Reasons}
		if f.Received > 0 {
			share := float64(st.Count) / float64(f.Received)
			r.Share = &share
		}
		return r
	}
	v.Stages = []funnelRow{
		stage("Received from its sources", "f-received", views.FunnelStage{Count: f.Received}),
		stage("Dropped before it", "f-dropped", f.Dropped),
		stage("Delivered on the first attempt", "f-delivered", f.DeliveredFirstAttempt),
		stage("Delivered after retries", "f-retried", f.DeliveredAfterRetries),
		stage("Retrying", "f-retrying", f.Retrying),
		stage("Dead-lettered", "f-dead", f.DeadLettered),
	}
	v.SVG = funnelSVG(v)
	return v
}

// Funnel geometry, in viewBox units.
const (
	funnelW     = 520.0
	funnelRowH  = 26.0
	funnelLabel = 190.0 // room for the stage names
	funnelCount = 64.0  // room for the counts after the bars
)

// funnelSVG draws one horizontal bar per stage, its length the stage's share of the messages
// received, with its count; an aria-label says it all in words.
func funnelSVG(v funnelView) template.HTML {
	h := funnelRowH * float64(len(v.Stages))
	plot := funnelW - funnelLabel - funnelCount
	var words []string
	for _, s := range v.Stages {
		words = append(words, s.Name+" "+fmtCount(s.Count))
	}
	label := "Where the messages of the last " + windowWord(v.Window) + " went: " + strings.Join(words, ", ")
	var b strings.Builder
	b.WriteString(`<svg class="chart" viewBox="0 0 ` + num(funnelW) + " " + num(h) + `" role="img" aria-label="` + html.EscapeString(label) +
		`" xmlns="http://www.w3.org/2000/svg"><title>` + html.EscapeString(label) + `</title>`)
	for i, s := range v.Stages {
		y := funnelRowH * float64(i)
		w := 0.0
		if s.Share != nil {
			w = plot * *s.Share
		}
		if s.Count > 0 {
			w = max(w, 1.5) // a stage with messages always shows
		}
		b.WriteString(`<text x="0" y="` + num(y+17) + `">` + html.EscapeString(s.Name) + `</text>`)
		b.WriteString(`<rect class="f-track" x="` + num(funnelLabel) + `" y="` + num(y+5) + `" width="` + num(plot) + `" height="16" rx="2"/>`)
		b.WriteString(`<rect class="` + s.Class + `" x="` + num(funnelLabel) + `" y="` + num(y+5) + `" width="` + num(w) + `" height="16" rx="2"><title>` +
			html.EscapeString(s.Name+": "+fmtCount(s.Count)+" ("+fmtPct(s.Share)+")") + `</title></rect>`)
		b.WriteString(`<text class="f-count" x="` + num(funnelLabel+plot+6) + `" y="` + num(y+17) + `">` + fmtCount(s.Count) + `</text>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every text above is escaped
}
