package console

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// uiFuncs are the template functions of the UI's pages.
var uiFuncs = template.FuncMap{
	"ago":    fmtAgo,
	"when":   fmtWhen,
	"pct":    fmtPct,
	"ms":     fmtMs,
	"count":  fmtCount,
	"pretty": fmtPretty,
	"add":    func(a, b int) int { return a + b },
	// seq is 0..n-1 (form rows).
	"seq": func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	},
	"join": strings.Join,
}

// fmtAgo says how long ago t was: "12 s ago", "3 min ago", "2 h ago", or the date.
func fmtAgo(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := time.Since(t)
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + " s ago"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + " min ago"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + " h ago"
	}
	return t.UTC().Format("2006-01-02")
}

// fmtWhen formats a time in UTC to the second.
func fmtWhen(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// float returns v (a float64 or *float64) and whether it has a value.
func float(v any) (float64, bool) {
	switch x := v.(type) {
	case *float64:
		if x == nil {
			return 0, false
		}
		return *x, !math.IsNaN(*x)
	case float64:
		return x, !math.IsNaN(x)
	}
	return 0, false
}

// fmtPct formats a rate in [0, 1] as a percentage; no value is "–".
func fmtPct(v any) string {
	f, ok := float(v)
	if !ok {
		return "–"
	}
	return strconv.FormatFloat(f*100, 'f', 1, 64) + " %"
}

// fmtMs formats milliseconds; no value is "–".
func fmtMs(v any) string {
	f, ok := float(v)
	if !ok {
		return "–"
	}
	if f >= 1000 {
		return strconv.FormatFloat(f/1000, 'f', 2, 64) + " s"
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " ms"
}

// fmtCount formats an integer with thousands separators.
func fmtCount(v any) string {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	case uint64:
		n = int64(x)
	case uint32:
		n = int64(x)
	default:
		return fmt.Sprint(v)
	}
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// fmtPretty indents JSON for reading.
func fmtPretty(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
