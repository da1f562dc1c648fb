package console

import (
	"slices"
	"testing"
	"time"
)

// TestFmtWhen: every time of the UI in one form, whether the page has a time.Time or an API
// timestamp (the DLQ's times were shown raw, as ISO strings).
func TestFmtWhen(t *testing.T) {
	at := time.Date(2026, 11, 27, 9, 5, 7, 123e6, time.FixedZone("CET", 3600))
	for _, c := range []struct {
		in   any
		want string
	}{
		{at, "2026-11-27 08:05:07 UTC"},
		{&at, "2026-11-27 08:05:07 UTC"},
		{"2026-11-27T08:05:07.123Z", "2026-11-27 08:05:07 UTC"},
		{time.Time{}, ""},
		{(*time.Time)(nil), ""},
		{"", ""},
		{"yesterday", "yesterday"}, // not a timestamp: shown as it is
		{42, ""},
	} {
		if got := fmtWhen(c.in); got != c.want {
			t.Errorf("fmtWhen(%#v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestPlural: one thing, several, thousands, an irregular plural, any integer type.
func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n    any
		one  string
		many []string
		want string
	}{
		{1, "message", nil, "1 message"},
		{0, "message", nil, "0 messages"},
		{2, "user id", nil, "2 user ids"},
		{uint64(1), "attempt", nil, "1 attempt"},
		{int64(1234), "attempt", nil, "1,234 attempts"},
		{3, "entry", []string{"entries"}, "3 entries"},
		{1, "entry", []string{"entries"}, "1 entry"},
	} {
		if got := plural(c.n, c.one, c.many...); got != c.want {
			t.Errorf("plural(%v, %q) = %q, want %q", c.n, c.one, got, c.want)
		}
	}
}

// TestSortTiers: the retry tiers in the order of their delays, not of their names as text.
func TestSortTiers(t *testing.T) {
	rows := []tierRow{{Topic: "webhooks.retry.1h"}, {Topic: "webhooks.retry.15m"}, {Topic: "webhooks.retry.10s"}, {Topic: "webhooks.retry.1m"},
		{Topic: "other"}, {Topic: "webhooks.retry.1h30m"}, {Topic: "webhooks.retry.5m"}}
	var got []string
	for _, r := range sortTiers(rows) {
		got = append(got, r.Topic)
	}
	want := []string{"webhooks.retry.10s", "webhooks.retry.1m", "webhooks.retry.5m", "webhooks.retry.15m", "webhooks.retry.1h", "webhooks.retry.1h30m", "other"}
	if !slices.Equal(got, want) {
		t.Fatalf("sortTiers: %v, want %v", got, want)
	}
}

// TestFmtDuration: a duration in words.
func TestFmtDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{10 * time.Minute: "10 minutes", time.Hour: "1 hour", 90 * time.Second: "90 seconds", time.Minute: "1 minute"} {
		if got := fmtDuration(d); got != want {
			t.Errorf("fmtDuration(%s) = %q, want %q", d, got, want)
		}
	}
}
