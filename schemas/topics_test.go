package schemas

import (
	"testing"
	"time"
)

func TestRetryTopic(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{10 * time.Second, "webhooks.retry.10s"},
		{time.Minute, "webhooks.retry.1m"},
		{5 * time.Minute, "webhooks.retry.5m"},
		{time.Hour, "webhooks.retry.1h"},
		{90 * time.Minute, "webhooks.retry.1h30m"},
		{90 * time.Second, "webhooks.retry.1m30s"},
		{1500 * time.Millisecond, "webhooks.retry.1.5s"},
	} {
		if got := RetryTopic(tc.d); got != tc.want {
			t.Errorf("RetryTopic(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// TestParseRetrySchedule parses the default schedule, which must be the one of
// docs/delivery.md#retry-tiers.
func TestParseRetrySchedule(t *testing.T) {
	got, err := ParseRetrySchedule(DefaultRetrySchedule)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, time.Hour, time.Hour}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	for _, bad := range []string{"", "10s,,1m", "abc", "0s", "-1s"} {
		if _, err := ParseRetrySchedule(bad); err == nil {
			t.Errorf("ParseRetrySchedule(%q): want error", bad)
		}
	}
}
