package console

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
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
	"join":   strings.Join,
	"plural": plural,
	// pathEscape makes an id one segment of a path (a message id may hold "/" or "?").
	"pathEscape": url.PathEscape,
}

// fmtDuration says a duration in words: "10 minutes", "1 hour", "90 seconds".
func fmtDuration(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int(d/time.Hour), "hour")
	case d >= time.Minute && d%time.Minute == 0:
		return plural(int(d/time.Minute), "minute")
	}
	return plural(int(d/time.Second), "second")
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

// whenLayout is the one form of a time in the UI: UTC, to the second.
const whenLayout = "2006-01-02 15:04:05 UTC"

// fmtWhen formats a time in UTC to the second, the one form of a time on every page: a
// time.Time, a *time.Time or a timestamp of the API (RFC 3339, as the DLQ's and the
// regulations' times are kept); anything else, or no time, is "".
func fmtWhen(v any) string {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = x
	case *time.Time:
		if x != nil {
			t = *x
		}
	case string:
		parsed, err := schemas.ParseTimestamp(x)
		if err != nil {
			return x // not a timestamp: shown as it is rather than hidden
		}
		t = parsed
	}
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(whenLayout)
}

// fmtWhenAgo is a time in the UI's form with how long ago it was: "2026-11-27 10:01:02 UTC
// (3 min ago)".
func fmtWhenAgo(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return fmtWhen(t) + " (" + fmtAgo(t) + ")"
}

// plural says how many of a thing: "1 message", "2 messages", "1,024 user ids". many is the
// plural form, for the words whose plural is not one + "s".
func plural(n any, one string, many ...string) string {
	if i, _ := integer(n); i == 1 {
		return "1 " + one
	}
	word := one + "s"
	if len(many) > 0 {
		word = many[0]
	}
	return fmtCount(n) + " " + word
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

// integer returns v (any integer type) as an int64, and whether it is one.
func integer(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case uint64:
		return int64(x), true
	case uint32:
		return int64(x), true
	}
	return 0, false
}

// fmtCount formats an integer with thousands separators.
func fmtCount(v any) string {
	n, ok := integer(v)
	if !ok {
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
