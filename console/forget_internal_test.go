package console

import (
	"testing"
	"time"
)

// TestUserRuleHides: a deletion hides what was received before it; a suppression hides what
// was received from it until its end, and nothing after; marks read twice or out of order count
// once, in time order.
func TestUserRuleHides(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	var deleted userRule
	deleted.deletedBefore = at(10)
	var suppressed userRule
	suppressed.mark(at(30), false) // read before the suppression it ends
	suppressed.mark(at(20), true)
	suppressed.mark(at(20), true) // twice: once
	suppressed.mark(at(40), true)
	suppressed.mark(at(60), true)
	suppressed.mark(at(60), false) // at the same time, read last: it counts
	if len(suppressed.marks) != 5 {
		t.Fatalf("marks %v, want 5", suppressed.marks)
	}
	for _, tt := range []struct {
		name string
		rule *userRule
		min  int
		want bool
	}{
		{"before the deletion", &deleted, 9, true},
		{"at the deletion", &deleted, 10, false},
		{"after the deletion", &deleted, 11, false},
		{"before the suppression", &suppressed, 19, false},
		{"at the suppression", &suppressed, 20, true},
		{"during the suppression", &suppressed, 25, true},
		{"at the unsuppression", &suppressed, 30, false},
		{"between the suppressions", &suppressed, 35, false},
		{"during the second suppression", &suppressed, 50, true},
		{"after marks at the same time", &suppressed, 61, false},
	} {
		if got := tt.rule.hides(at(tt.min)); got != tt.want {
			t.Errorf("%s: hides = %v, want %v", tt.name, got, tt.want)
		}
	}
}
