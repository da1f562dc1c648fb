package console

import (
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// Server-rendered SVG charts (no charting framework, no script): axes with units, time labels
// in UTC, one <title> per point for the hover value, an aria-label that says what the chart
// shows. Sizes are in the viewBox's units: the chart scales with its box (CSS width: 100%) and
// stays readable from 390 px wide. Only SVG presentation attributes are used (the CSP blocks
// style attributes).

// Chart geometry, in viewBox units.
const (
	chartW      = 420.0
	chartH      = 210.0
	chartLeft   = 56.0 // room for the y labels
	chartRight  = 10.0
	chartTop    = 22.0 // room for the legend
	chartBottom = 30.0 // room for the x labels
)

// chartSeries is one line (or the bars) of a chart; Values[i] is nil where there is no value.
type chartSeries struct {
	Name   string
	Class  string // a CSS class: the stroke/fill colour (app.css)
	Values []*float64
}

// chart is one chart to render.
type chart struct {
	Label  string // the aria-label: what it shows, in words
	Empty  string // shown instead of the chart when no point has a value
	Unit   string // "%" or "ms": the y labels' unit
	Bars   bool   // the first series as bars, else every series as lines
	YMax   float64
	Times  []time.Time
	Series []chartSeries
	Hover  []string // per point: the <title> text
	// BarClass, when set, gives a bar's class by its value (a failing minute in red).
	BarClass func(v float64) string
}

// svg renders the chart, or the Empty message when there is nothing to draw.
func (c chart) svg() template.HTML {
	n := len(c.Times)
	has := false
	for _, s := range c.Series {
		for _, v := range s.Values {
			has = has || v != nil
		}
	}
	if n == 0 || !has {
		return template.HTML(`<p class="chart-empty">` + html.EscapeString(c.Empty) + `</p>`)
	}
	yMax := c.YMax
	if yMax <= 0 {
		yMax = niceCeil(maxOf(c.Series))
	}
	plotW := chartW - chartLeft - chartRight
	plotH := chartH - chartTop - chartBottom
	step := plotW / float64(n)
	x := func(i int) float64 { return chartLeft + step*(float64(i)+0.5) }
	y := func(v float64) float64 { return chartTop + plotH*(1-math.Min(v, yMax)/yMax) }

	var b strings.Builder
	b.WriteString(`<svg class="chart" viewBox="0 0 `)
	b.WriteString(num(chartW) + " " + num(chartH))
	b.WriteString(`" role="img" aria-label="` + html.EscapeString(c.Label) + `" xmlns="http://www.w3.org/2000/svg">`)
	b.WriteString(`<title>` + html.EscapeString(c.Label) + `</title>`)
	// Y axis: 5 ticks with grid lines and their values with the unit.
	for k := 0; k <= 4; k++ {
		v := yMax * float64(k) / 4
		yy := y(v)
		b.WriteString(`<line class="grid" x1="` + num(chartLeft) + `" x2="` + num(chartW-chartRight) + `" y1="` + num(yy) + `" y2="` + num(yy) + `"/>`)
		b.WriteString(`<text class="ylabel" x="` + num(chartLeft-4) + `" y="` + num(yy+3.5) + `" text-anchor="end">` + html.EscapeString(tickLabel(v, c.Unit)) + `</text>`)
	}
	// X axis: the baseline and about 6 time labels, on whole steps.
	b.WriteString(`<line class="axis" x1="` + num(chartLeft) + `" x2="` + num(chartW-chartRight) + `" y1="` + num(chartTop+plotH) + `" y2="` + num(chartTop+plotH) + `"/>`)
	b.WriteString(`<line class="axis" x1="` + num(chartLeft) + `" x2="` + num(chartLeft) + `" y1="` + num(chartTop) + `" y2="` + num(chartTop+plotH) + `"/>`)
	every := max(1, (n+5)/6)
	for i := 0; i < n; i += every {
		b.WriteString(`<text class="xlabel" x="` + num(x(i)) + `" y="` + num(chartTop+plotH+14) + `" text-anchor="middle">` + c.Times[i].UTC().Format("15:04") + `</text>`)
	}
	b.WriteString(`<text class="xlabel" x="` + num(chartW-chartRight) + `" y="` + num(chartH-3) + `" text-anchor="end">UTC</text>`)
	// The legend.
	lx := chartLeft
	for _, s := range c.Series {
		b.WriteString(`<rect class="` + s.Class + `" x="` + num(lx) + `" y="6" width="10" height="10" rx="2"/>`)
		b.WriteString(`<text class="legend" x="` + num(lx+14) + `" y="15">` + html.EscapeString(s.Name) + `</text>`)
		lx += 14 + 7*float64(len(s.Name)) + 16
	}
	// The data.
	if c.Bars && len(c.Series) > 0 {
		s := c.Series[0]
		bw := math.Max(step*0.8, 0.8)
		for i, v := range s.Values {
			if v == nil {
				continue
			}
			cls := s.Class
			if c.BarClass != nil {
				cls = c.BarClass(*v)
			}
			top := y(*v)
			h := math.Max(chartTop+plotH-top, 1) // a 0 % minute still shows
			b.WriteString(`<rect class="` + cls + `" x="` + num(x(i)-bw/2) + `" y="` + num(chartTop+plotH-h) + `" width="` + num(bw) + `" height="` + num(h) + `"/>`)
		}
	} else {
		for _, s := range c.Series {
			// A polyline per run of points with values: no line across a gap.
			var run []string
			flush := func() {
				switch len(run) {
				case 0:
				case 1:
					xy := strings.Split(run[0], ",")
					b.WriteString(`<circle class="` + s.Class + `" cx="` + xy[0] + `" cy="` + xy[1] + `" r="1.8"/>`)
				default:
					b.WriteString(`<polyline class="line ` + s.Class + `" fill="none" points="` + strings.Join(run, " ") + `"/>`)
				}
				run = run[:0]
			}
			for i, v := range s.Values {
				if v == nil {
					flush()
					continue
				}
				run = append(run, num(x(i))+","+num(y(*v)))
			}
			flush()
		}
	}
	// Hover targets: one full-height column per point with its <title>.
	for i := 0; i < n && i < len(c.Hover); i++ {
		b.WriteString(`<rect class="hit" fill="transparent" x="` + num(chartLeft+step*float64(i)) + `" y="` + num(chartTop) + `" width="` + num(step) + `" height="` + num(plotH) + `"><title>` +
			html.EscapeString(c.Hover[i]) + `</title></rect>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every text above is escaped
}

// num formats a coordinate with at most one decimal.
func num(v float64) string {
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
}

func maxOf(series []chartSeries) float64 {
	m := 0.0
	for _, s := range series {
		for _, v := range s.Values {
			if v != nil && *v > m {
				m = *v
			}
		}
	}
	return m
}

// niceCeil is the smallest of 1, 2, 2.5, 5 × 10^k at or above v (1 for v ≤ 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// tickLabel is an axis value with its unit.
func tickLabel(v float64, unit string) string {
	switch unit {
	case "%":
		return strconv.FormatFloat(v, 'f', -1, 64) + " %"
	case "ms":
		if v >= 1000 {
			return strconv.FormatFloat(v/1000, 'f', -1, 64) + " s"
		}
		return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) + " ms"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// successChart is a destination's success rate per point of st, as bars (red under 95 %).
func successChart(st stats, window string) template.HTML {
	c := chart{Unit: "%", Bars: true, YMax: 100,
		Label: "Success rate per " + stepWord(st.Step) + " over the last " + windowWord(window) + ": " + fmtPct(st.SuccessRate) + " of " + plural(st.Attempts, "attempt"),
		Empty: "No attempt in the last " + windowWord(window) + ": nothing to chart yet. Send a test event below, or events from a connected source.",
		BarClass: func(v float64) string {
			if v < 95 {
				return "bar-bad"
			}
			return "bar-ok"
		}}
	s := chartSeries{Name: "success rate (red under 95 %)", Class: "bar-ok"}
	for _, p := range st.Series {
		c.Times = append(c.Times, p.At)
		label := p.At.UTC().Format("15:04")
		if p.Attempts == 0 {
			s.Values = append(s.Values, nil)
			c.Hover = append(c.Hover, label+" · no attempt")
			continue
		}
		v := float64(p.Successes) / float64(p.Attempts) * 100
		s.Values = append(s.Values, &v)
		c.Hover = append(c.Hover, label+" · "+strconv.FormatFloat(v, 'f', 1, 64)+" % · "+plural(p.Attempts, "attempt"))
	}
	c.Series = []chartSeries{s}
	return c.svg()
}

// latencyChart is a destination's latency p50 and p99 per point of st, as two lines.
func latencyChart(st stats, window string) template.HTML {
	c := chart{Unit: "ms",
		Label: "Latency per " + stepWord(st.Step) + " over the last " + windowWord(window) + ": p50 " + fmtMs(st.LatencyMs.P50) + ", p99 " + fmtMs(st.LatencyMs.P99),
		Empty: "No attempt in the last " + windowWord(window) + ": no latency to chart yet."}
	p50 := chartSeries{Name: "p50", Class: "line-p50"}
	p99 := chartSeries{Name: "p99", Class: "line-p99"}
	for _, p := range st.Series {
		c.Times = append(c.Times, p.At)
		p50.Values = append(p50.Values, p.LatencyMs.P50)
		p99.Values = append(p99.Values, p.LatencyMs.P99)
		label := p.At.UTC().Format("15:04")
		if p.Attempts == 0 {
			c.Hover = append(c.Hover, label+" · no attempt")
			continue
		}
		c.Hover = append(c.Hover, label+" · p50 "+fmtMs(p.LatencyMs.P50)+" · p99 "+fmtMs(p.LatencyMs.P99)+" · "+plural(p.Attempts, "attempt"))
	}
	c.Series = []chartSeries{p50, p99}
	return c.svg()
}

func stepWord(step string) string {
	if step == "1m" {
		return "minute"
	}
	return strings.TrimSuffix(step, "m") + " minutes"
}

func windowWord(window string) string {
	if window == "24h" {
		return "24 hours"
	}
	return "hour"
}
