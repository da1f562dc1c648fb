package console_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestSourceEventsSealed: the source debugger shows sealed events opened, and never shows an
// event whose data key was shredded (its user was deleted).
func TestSourceEventsSealed(t *testing.T) { synctest.Test(t, testSourceEventsSealed) }

func testSourceEventsSealed(t *testing.T) {
	h := newVirtualHarness(t, nil)
	keys := h.env.Keyring()
	rec := func(user, id string) *kgo.Record {
		return &kgo.Record{Topic: schemas.TopicEvents, Key: []byte(user),
			Value:   []byte(`{"type":"track","event":"Signed Up","userId":"` + user + `","messageId":"` + id + `","properties":{"email":"` + user + `@example.com"}}`),
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderSourceID, Value: []byte("web")}, {Key: schemas.HeaderMessageID, Value: []byte(id)}, {Key: schemas.HeaderType, Value: []byte("track")}}}
	}
	jane, bob := rec("jane", "m-jane"), rec("bob", "m-bob")
	h.env.Seal(keys, jane, bob)
	if n, err := keys.Shred(h.env.Ctx, "jane"); err != nil || n != 1 {
		t.Fatalf("Shred = %d, %v", n, err)
	}
	synctest.Wait() // the console's keyring reads the shred before the events' reader gets jane's event
	h.env.Produce(jane, bob, rec("carl", "m-plain"))
	servicetest.Eventually(t, 10*time.Second, "the recent events", func() string {
		data := h.do("GET", "/v1/sources/web/events/recent", nil).JSON(t)["data"].([]any)
		got := map[string]any{}
		for _, e := range data {
			ev := e.(map[string]any)
			got[ev["messageId"].(string)] = ev["message"]
		}
		if len(got) != 2 {
			return fmt.Sprint(got)
		}
		if _, ok := got["m-jane"]; ok {
			t.Fatalf("the event of a deleted user is shown: %v", got)
		}
		if m, ok := got["m-bob"].(map[string]any); !ok || m["properties"].(map[string]any)["email"] != "bob@example.com" {
			t.Fatalf("the sealed event of bob is not shown opened: %v", got["m-bob"])
		}
		return ""
	})
}
