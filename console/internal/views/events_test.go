package views

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// accepted is a tracking.events record of user's message id.
func accepted(user, id string, at time.Time) Record {
	return Record{Source: "web", R: &kgo.Record{Key: []byte(user), Value: []byte(`{"type":"track","messageId":"` + id + `"}`), Timestamp: at,
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderMessageID, Value: []byte(id)}, {Key: schemas.HeaderType, Value: []byte("track")}}}}
}

func ids(vs []EventView) string {
	var out []string
	for _, v := range vs {
		out = append(out, v.MessageID)
	}
	return strings.Join(out, " ")
}

// TestEventsForget: forgetting events from a ring that has wrapped keeps the others in order,
// newest last, and the next events go after them; the forgotten ones' bytes are zeroed, and a
// live stream hears of each.
func TestEventsForget(t *testing.T) {
	l := NewEvents(4)
	var batch []Record
	for _, id := range []string{"a", "x1", "b", "x2", "c", "x3"} { // the ring holds b x2 c x3
		batch = append(batch, accepted(id, id, t0))
	}
	l.Add(batch, nil)
	ch := make(chan EventView, 10)
	stop := l.Watch("web", ch)
	defer stop()
	var dropped [][]byte
	for e := range l.sources["web"].ring.All() {
		if e.messageID[0] == 'x' {
			dropped = append(dropped, e.raw)
		}
	}
	gone, n := l.Forget(func(user string, at time.Time) bool { return user[0] == 'x' && at.Equal(t0) })
	for _, b := range dropped {
		if b[:cap(b)][0] != 0 {
			t.Errorf("a forgotten event's bytes are not zeroed: %q", b[:cap(b)])
		}
	}
	slices.Sort(gone)
	if n != 2 || !slices.Equal(gone, []string{"x2", "x3"}) {
		t.Fatalf("forgot %d: %v; want 2: x2 x3", n, gone)
	}
	if len(ch) != 2 || (<-ch).Status != StatusForgotten {
		t.Fatalf("the live stream heard %d events, want 2 forgotten", len(ch)+1)
	}
	l.Add([]Record{accepted("d", "d", t0)}, nil)
	if got := ids(l.Recent("web", -1)); got != "d c b" {
		t.Fatalf("recent after Forget: %q, want d c b", got)
	}
}

// TestEventsQueries: Recent (newest first, at most n), LastHour, Delivered (accepted only) and
// a rejected message's fields; what they return is a copy; Add skips what forgets reports.
func TestEventsQueries(t *testing.T) {
	l := NewEvents(10)
	rejected := Record{Source: "web", Rejected: true, R: &kgo.Record{Key: []byte("k"), Value: []byte(`{"type":"page","messageId":"r1","userId":"u"}`), Timestamp: t0,
		Headers: []kgo.RecordHeader{{Key: schemas.HeaderReason, Value: []byte("invalid")}}}}
	dropped := l.Add([]Record{accepted("u", "m1", t0.Add(-2*time.Hour)), accepted("u", "m2", t0), rejected, accepted("hidden", "m3", t0)},
		func(r Record) bool { return string(r.R.Key) == "hidden" })
	if !slices.Equal(dropped, []string{"m3"}) {
		t.Fatalf("dropped %v, want m3", dropped)
	}
	recent := l.Recent("web", -1)
	if ids(recent) != "r1 m2 m1" || recent[0].Status != "rejected" || recent[0].Type != "page" || recent[0].Reason != "invalid" {
		t.Fatalf("recent: %+v", recent)
	}
	if got := ids(l.Recent("web", 1)); got != "r1" {
		t.Fatalf("the last one: %q", got)
	}
	recent[1].Message[0] = 'X'
	if again := l.Recent("web", -1); again[1].Message[0] != '{' {
		t.Fatal("changing Recent's answer changed the view")
	}
	if got := l.Recent("nope", -1); got == nil || len(got) != 0 {
		t.Fatalf("an unknown source: %#v", got)
	}
	if a, r := l.LastHour("web", t0); a != 1 || r != 1 {
		t.Fatalf("last hour: %d accepted, %d rejected; want 1, 1", a, r)
	}
	body := l.Delivered([]string{"nope", "web"}, "m2")
	if !strings.Contains(string(body), `"m2"`) {
		t.Fatalf("delivered m2: %q", body)
	}
	body[0] = 'X'
	if again := l.Delivered([]string{"web"}, "m2"); again[0] != '{' {
		t.Fatal("changing Delivered's answer changed the view")
	}
	if l.Delivered([]string{"web"}, "r1") != nil || l.Delivered([]string{"web"}, "") != nil {
		t.Fatal("a rejected message, or none, is delivered")
	}
	// A rejected message is its userId's (docs/console.md#what-the-console-forgets).
	if _, n := l.Forget(func(user string, _ time.Time) bool { return user == "u" }); n != 3 {
		t.Fatalf("forgot %d of u's events, want 3", n)
	}
}

// TestEventsPrune: Prune drops the sources keep refuses, but one with a live stream.
func TestEventsPrune(t *testing.T) {
	l := NewEvents(10)
	watched := accepted("u", "m2", t0)
	watched.Source = "watched"
	l.Add([]Record{accepted("u", "m1", t0), watched}, nil)
	stop := l.Watch("watched", make(chan EventView, 1))
	l.Prune(func(string) bool { return false })
	if len(l.Recent("web", -1)) != 0 || len(l.Recent("watched", -1)) != 1 {
		t.Fatal("Prune dropped the watched source, or kept the other")
	}
	stop()
	l.Prune(func(string) bool { return false })
	if len(l.Recent("watched", -1)) != 0 {
		t.Fatal("Prune kept a source no longer watched")
	}
}
