package views

import (
	"errors"
	"testing"
)

// TestTierLag: before a reading it answers an error; then the last reading, as a copy.
func TestTierLag(t *testing.T) {
	var l TierLag
	if _, err := l.Rows(); err == nil {
		t.Fatal("no error before the first reading")
	}
	l.Set([]TierRow{{Topic: "webhooks.retry.1m", Lag: 3}}, nil, t0)
	rows, err := l.Rows()
	if err != nil || len(rows) != 1 || rows[0].Lag != 3 {
		t.Fatalf("rows %v, %v", rows, err)
	}
	rows[0].Lag = 99
	if again, _ := l.Rows(); again[0].Lag != 3 {
		t.Fatal("changing Rows' answer changed the view")
	}
	l.Set(nil, errors.New("broker down"), t0)
	if _, err := l.Rows(); err == nil || err.Error() != "broker down" {
		t.Fatalf("the reading's error: %v", err)
	}
}
