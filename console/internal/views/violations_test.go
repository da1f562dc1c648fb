package views

import (
	"fmt"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestViolationsCountsAndSamples: counts by (event, field, type) over the last 24 hours, most
// first; the last ViolationSamples samples of each type, newest first; older hours drop out.
func TestViolationsCountsAndSamples(t *testing.T) {
	v := NewViolations()
	now := time.Date(2026, 11, 27, 12, 30, 0, 0, time.UTC)
	typ := schemas.Violation{Type: "Invalid Type", Field: "properties.total", Description: "d"}
	req := schemas.Violation{Type: "Required", Field: "properties.currency", Description: "d"}
	v.Add("web", ViolationSample{MessageID: "old", Event: "Order Completed", Type: "track", At: now.Add(-25 * time.Hour), Violations: []schemas.Violation{typ}})
	for i := range 7 {
		v.Add("web", ViolationSample{MessageID: fmt.Sprint("m", i), Event: "Order Completed", Type: "track", At: now.Add(time.Duration(i-7) * time.Hour), Violations: []schemas.Violation{typ}})
	}
	v.Add("web", ViolationSample{MessageID: "r", Event: "Order Completed", Type: "track", At: now, Violations: []schemas.Violation{req, typ}})
	v.Add("app", ViolationSample{MessageID: "a", Type: "identify", At: now, Violations: []schemas.Violation{req}})
	v.Add("web", ViolationSample{MessageID: "none", At: now}) // no violation: nothing

	got := v.Of("web", now)
	if got.Total != 9 || len(got.Counts) != 2 {
		t.Fatalf("total %d counts %+v, want 9 in 2 rows", got.Total, got.Counts)
	}
	if c := got.Counts[0]; c.Count != 8 || c.Field != "properties.total" || c.Type != "Invalid Type" || c.Event != "Order Completed" {
		t.Errorf("first row %+v", c)
	}
	var typeSamples []string
	for _, s := range got.Samples {
		if s.Violations[len(s.Violations)-1].Type == "Invalid Type" {
			typeSamples = append(typeSamples, s.MessageID)
		}
	}
	if want := []string{"r", "m6", "m5", "m4", "m3"}; fmt.Sprint(typeSamples) != fmt.Sprint(want) {
		t.Errorf("samples with Invalid Type %v, want %v (the last %d, newest first)", typeSamples, want, ViolationSamples)
	}
	if got := v.Of("nobody", now); got.Total != 0 || got.Counts == nil || got.Samples == nil {
		t.Errorf("unknown source: %+v", got)
	}
	v.Forget("web")
	if got := v.Of("web", now); got.Total != 0 {
		t.Errorf("after Forget: %+v", got)
	}
}

// TestViolationsBounded: past MaxViolationKeys distinct entries in an hour, the rest count
// under one "(other)" row.
func TestViolationsBounded(t *testing.T) {
	v := NewViolations()
	now := time.Date(2026, 11, 27, 12, 30, 0, 0, time.UTC)
	for i := range MaxViolationKeys + 10 {
		v.Add("web", ViolationSample{MessageID: "m", Event: fmt.Sprint("e", i), At: now, Violations: []schemas.Violation{{Type: "Required", Field: "f"}}})
	}
	got := v.Of("web", now)
	if len(got.Counts) != MaxViolationKeys+1 || got.Total != MaxViolationKeys+10 {
		t.Fatalf("%d rows, total %d", len(got.Counts), got.Total)
	}
	if c := got.Counts[0]; c.Event != "(other)" || c.Count != 10 {
		t.Errorf("first row %+v, want (other) with 10", c)
	}
}
