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

// TestEventRingRemove: removing events from a ring that has wrapped keeps the others in order,
// newest last, and the next events go after them; the removed ones' bytes are zeroed.
func TestEventRingRemove(t *testing.T) {
	se := &sourceEvents{ring: make([]event, 4)}
	add := func(id string) {
		e := &se.ring[se.next]
		e.messageID, e.raw = id, append(e.raw[:0], id...)
		se.next = (se.next + 1) % len(se.ring)
		se.size = min(se.size+1, len(se.ring))
	}
	for _, id := range []string{"a", "x1", "b", "x2", "c", "x3"} { // the ring holds b x2 c x3
		add(id)
	}
	var dropped [][]byte
	n := se.remove(func(e *event) bool {
		if e.messageID[0] == 'x' {
			dropped = append(dropped, e.raw)
			return true
		}
		return false
	})
	for _, b := range dropped {
		if string(b[:cap(b)][:1]) != "\x00" {
			t.Errorf("a removed event's bytes are not zeroed: %q", b[:cap(b)])
		}
	}
	add("d")
	var got string
	for i := se.size; i >= 1; i-- {
		got += se.ring[(se.next-i+len(se.ring))%len(se.ring)].messageID
	}
	if n != 2 || got != "bcd" {
		t.Errorf("removed %d, ring %q; want 2 and bcd", n, got)
	}
}
