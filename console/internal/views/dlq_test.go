package views

import (
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform"
)

func deadLetter(dest, msg string, offset int64) platform.DeadLetter {
	return platform.DeadLetter{Partition: 0, Offset: offset, At: t0.Add(time.Duration(offset) * time.Second), DestinationID: dest, MessageID: msg, Reason: "retries exhausted"}
}

// TestDLQQueries: a message is counted and listed once, by its newest dead letter; a replay
// mark takes it off the count and the list (but with again); a hidden user's dead letter is not
// added; and List's answer is a copy.
func TestDLQQueries(t *testing.T) {
	c := NewDLQ(10)
	for _, dl := range []platform.DeadLetter{deadLetter("d", "m1", 1), deadLetter("d", "m2", 2), deadLetter("d", "m1", 3)} {
		if !c.Add(dl, "u", nil) {
			t.Fatal("Add refused a dead letter without a rule")
		}
	}
	if c.Add(deadLetter("d", "m3", 4), "hidden", func(user string, _ time.Time) bool { return user == "hidden" }) {
		t.Fatal("Add took a hidden user's dead letter")
	}
	if n := c.Pending("d"); n != 2 {
		t.Fatalf("pending %d, want 2", n)
	}
	list := c.List("d", false)
	if len(list) != 2 || list[0].MessageID != "m1" || list[0].Offset != 3 || list[1].MessageID != "m2" {
		t.Fatalf("list: %+v", list)
	}
	list[0].MessageID = "changed"
	if again := c.List("d", false); again[0].MessageID != "m1" {
		t.Fatal("changing List's answer changed the view")
	}
	c.MarkReplayed([]platform.DeadLetter{deadLetter("d", "m1", 3)}, t0.Add(time.Hour))
	if n, list := c.Pending("d"), c.List("d", false); n != 1 || len(list) != 1 || list[0].MessageID != "m2" {
		t.Fatalf("after the replay: pending %d, list %+v", n, list)
	}
	if all := c.List("d", true); len(all) != 2 || !all[0].ReplayedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("with again: %+v", all)
	}
	if c.Pending("nope") != 0 || c.List("nope", true) != nil {
		t.Fatal("an unknown destination has dead letters")
	}
}

// TestDLQForgetAndPrune: Forget drops a user's dead letters from the list and the count, and
// returns their message ids; Prune drops the destinations keep refuses.
func TestDLQForgetAndPrune(t *testing.T) {
	c := NewDLQ(10)
	c.Add(deadLetter("d", "m1", 1), "u", nil)
	c.Add(deadLetter("d", "m2", 2), "v", nil)
	c.Add(deadLetter("e", "m3", 3), "v", nil)
	ids, n := c.Forget(func(user string, received time.Time) bool { return user == "u" && received.Equal(t0.Add(time.Second)) })
	if n != 1 || len(ids) != 1 || ids[0] != "m1" {
		t.Fatalf("forgot %d: %v; want m1", n, ids)
	}
	if p, list := c.Pending("d"), c.List("d", true); p != 1 || len(list) != 1 || list[0].MessageID != "m2" {
		t.Fatalf("after Forget: pending %d, list %+v", p, list)
	}
	c.Prune(func(id string) bool { return id == "d" })
	if c.Pending("e") != 0 || c.Pending("d") != 1 {
		t.Fatal("Prune dropped the wrong destination")
	}
}
