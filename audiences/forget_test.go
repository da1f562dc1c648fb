package audiences_test

import (
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestDeletionForgetsLateEvents: an event of a deleted user accepted before the deletion but
// read after it (late) builds no profile again and sends no identify; one accepted after it
// does (a deletion suppresses nothing) (docs/audiences.md#deletion-and-suppression).
func TestDeletionForgetsLateEvents(t *testing.T) { synctest.Test(t, testDeletionForgetsLateEvents) }

func testDeletionForgetsLateEvents(t *testing.T) {
	h := newHarness(t, sources+vip)
	svc, _, _ := h.run("aud-late", nil)
	h.send(fmt.Sprintf(`{"type":"identify","userId":"gone","traits":{"plan":"pro"},"receivedAt":%q}`, at(0)))
	if got := h.identifies(1, 10*time.Second); len(got) != 1 || got[0].UserID != "gone" {
		t.Fatalf("first sync: %v", got)
	}
	h.advance(time.Minute)
	h.deletion("gone", schemas.KindDeleteOnly)
	servicetest.Eventually(t, 10*time.Second, "the deleted profile gone", func() string {
		if code := h.Get(api(svc)+"/v1/profiles/gone", testToken, nil); code != http.StatusNotFound {
			return fmt.Sprintf("profile after its deletion: %d", code)
		}
		return ""
	})
	h.advance(time.Minute)
	// Accepted 30 s before the deletion, read after it.
	h.send(fmt.Sprintf(`{"type":"identify","userId":"gone","traits":{"plan":"team"},"receivedAt":%q}`, at(-90*time.Second)))
	h.quiet(2500 * time.Millisecond)
	if code := h.Get(api(svc)+"/v1/profiles/gone", testToken, nil); code != http.StatusNotFound {
		t.Fatalf("a late event of the deleted user built its profile again: %d", code)
	}
	h.send(fmt.Sprintf(`{"type":"identify","userId":"gone","traits":{"plan":"team"},"receivedAt":%q}`, at(0)))
	if got := h.identifies(1, 10*time.Second); len(got) != 1 || got[0].UserID != "gone" || got[0].Traits["vip"] != true {
		t.Fatalf("an event accepted after the deletion: %v, want a new profile's join", got)
	}
}

// TestDeletionDropsIdentifiesOfItsBatch: an identify computed for a user in the same batch
// (transaction) as the user's deletion, before it, is not produced: it would reach
// destinations after the delete notice (docs/audiences.md#deletion-and-suppression).
func TestDeletionDropsIdentifiesOfItsBatch(t *testing.T) {
	synctest.Test(t, testDeletionDropsIdentifiesOfItsBatch)
}

func testDeletionDropsIdentifiesOfItsBatch(t *testing.T) {
	h := newHarness(t, sources+`
audiences:
  - id: vip
    name: VIP
    source: engage
    realtime: true
    rule:
      trait: plan
      in: [pro, team]
`)
	// Read in one poll when the service starts: an event of the user (handed on from a merged
	// id), then the user's deletion, in one partition of audiences.repartition.
	msg := fmt.Sprintf(`{"type":"identify","messageId":"m1","userId":"gone","traits":{"plan":"pro"},"receivedAt":%q}`, at(0))
	h.Produce(
		&kgo.Record{Topic: schemas.TopicAudiencesRepartition, Key: []byte("gone"), Value: []byte(`{"op":"event","into":"gone","message":` + msg + `}`)},
		&kgo.Record{Topic: schemas.TopicAudiencesRepartition, Key: []byte("gone"), Value: []byte(`{"op":"delete","deletion":{"userId":"gone","kind":"SUPPRESS_WITH_DELETE"}}`)},
	)
	h.send(fmt.Sprintf(`{"type":"identify","userId":"stays","traits":{"plan":"pro"},"receivedAt":%q}`, at(0)))
	h.run("aud-batch", nil)
	got := h.identifies(1, 10*time.Second)
	h.quiet(2500 * time.Millisecond)
	for _, id := range got {
		if id.UserID == "gone" {
			t.Fatalf("identifies %v: the deleted user's, computed before its deletion in the same batch, was produced", got)
		}
	}
}
