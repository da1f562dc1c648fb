package views

import (
	"slices"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestPending: one entry per message (its newest tier record), soonest due first; records the
// group committed past leave, as do messages a retry-now delivered; the bound per destination;
// Retryable leaves out what is being or was retried now.
func TestPending(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	v := NewPending(3)
	rec := func(msg, topic string, off int64, dueIn time.Duration) PendingRecord {
		return PendingRecord{DestinationID: "d", MessageID: msg, Topic: topic, Offset: off, DueAt: now.Add(dueIn), WrittenAt: now.Add(time.Duration(off) * time.Second)}
	}
	ids := func() []string {
		recs, _ := v.List("d", now)
		var out []string
		for _, r := range recs {
			out = append(out, r.MessageID)
		}
		return out
	}
	v.Add(rec("a", "webhooks.retry.1m", 1, time.Minute))
	v.Add(rec("b", "webhooks.retry.1m", 2, 30*time.Second))
	v.Add(rec("a", "webhooks.retry.5m", 3, 5*time.Minute)) // a failed again: its newer record
	if !v.Add(rec("c", "webhooks.retry.1m", 4, time.Second)) {
		t.Fatal("c not kept")
	}
	if v.Add(rec("a", "webhooks.retry.1m", 1, time.Minute)) {
		t.Error("a's older record, read again, replaced its newer one")
	}
	if got, want := ids(), []string{"c", "b", "a"}; !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	if v.Add(rec("e", "webhooks.retry.1m", 5, time.Second)) {
		t.Error("a fourth message kept past the bound of 3")
	}
	if _, dropped := v.List("d", now); dropped != 1 {
		t.Errorf("dropped %d, want 1", dropped)
	}
	v.SetCommitted(map[TopicPartition]int64{{Topic: "webhooks.retry.1m"}: 3}) // b consumed
	if got, want := ids(), []string{"c", "a"}; !slices.Equal(got, want) {
		t.Fatalf("after the commit: %v, want %v", got, want)
	}
	if v.Add(rec("b", "webhooks.retry.1m", 2, 30*time.Second)) {
		t.Error("a record below the committed offset was kept")
	}
	c := rec("c", "webhooks.retry.1m", 4, time.Second)
	v.Mark(c.Key(), RetryNowRequested, now)
	if recs, _ := v.Retryable("d", nil, now); len(recs) != 1 || recs[0].MessageID != "a" {
		t.Errorf("retryable %v, want a alone (c is being retried now)", recs)
	}
	if recs, _ := v.Retryable("d", nil, now.Add(RetryNowRequestedFor+time.Second)); len(recs) != 2 {
		t.Errorf("a request no deliverer marked still holds after %v", RetryNowRequestedFor)
	}
	v.Mark(c.Key(), schemas.RetryNowDelivered, now)
	if got, want := ids(), []string{"a"}; !slices.Equal(got, want) {
		t.Fatalf("after c's retry-now delivered it: %v, want %v", got, want)
	}
	recs, notPending := v.Retryable("d", []string{"a", "c", "zz", "a"}, now)
	if len(recs) != 1 || recs[0].MessageID != "a" || !slices.Equal(notPending, []string{"c", "zz"}) {
		t.Errorf("retryable %v, not pending %v", recs, notPending)
	}

	// Forget and Prune.
	v.Add(PendingRecord{DestinationID: "d", MessageID: "f", User: "u-del", Topic: "webhooks.retry.1m", Offset: 9, FirstAttemptAt: now})
	v.Add(PendingRecord{DestinationID: "gone", MessageID: "g", User: "u-keep", Topic: "webhooks.retry.1m", Offset: 10})
	forgotten, n := v.Forget(func(user string, _ time.Time) bool { return user == "u-del" })
	if n != 1 || !slices.Equal(forgotten, []string{"f"}) {
		t.Errorf("forgot %v (%d), want f", forgotten, n)
	}
	v.Prune(func(dest string) bool { return dest != "gone" })
	if recs, _ := v.List("gone", now); len(recs) != 0 {
		t.Errorf("a deleted destination's waiting messages still listed: %v", recs)
	}
	if got, want := ids(), []string{"a"}; !slices.Equal(got, want) {
		t.Errorf("after Forget and Prune: %v, want %v", got, want)
	}
}
