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

func TestValidateRetryDelays(t *testing.T) {
	if err := ValidateRetryDelays(DefaultRetryDelays()); err != nil {
		t.Errorf("the default schedule: %v", err)
	}
	for _, tt := range []struct {
		delays []time.Duration
		want   string
	}{
		{nil, "RETRY_SCHEDULE: at least one delay"},
		{[]time.Duration{time.Second, 0, -time.Second}, "RETRY_SCHEDULE: entry 2 must be positive\nRETRY_SCHEDULE: entry 3 must be positive"},
	} {
		if err := ValidateRetryDelays(tt.delays); err == nil || err.Error() != tt.want {
			t.Errorf("ValidateRetryDelays(%v) = %v, want %q", tt.delays, err, tt.want)
		}
	}
}
