package console_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestDLQOncePerMessage: the console lists, counts and replays a message once, whatever the DLQ
// holds for it (each failed replay dead-letters it anew): its newest dead letter stands for it
// (docs/console.md#replay-the-dead-letter-queue).
func TestDLQOncePerMessage(t *testing.T) {
	h := destHarness(t)
	b := newDestBrowser(t, h)
	dead := func(id, reason string) {
		h.env.Produce(&kgo.Record{Topic: schemas.TopicDLQ, Key: []byte("file-hooks:u1"), Value: []byte(`{"type":"track","event":"E","userId":"u1"}`),
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderDestinationID, Value: []byte("file-hooks")}, {Key: schemas.HeaderMessageID, Value: []byte(id)},
				{Key: schemas.HeaderReason, Value: []byte(reason)}}})
	}
	type page struct {
		Data []struct {
			MessageID  string `json:"messageId"`
			Reason     string `json:"reason"`
			ReplayedAt string `json:"replayedAt"`
		} `json:"data"`
		Total int `json:"total"`
	}
	list := func(query string) page {
		t.Helper()
		var p page
		r := h.do(http.MethodGet, "/v1/destinations/file-hooks/dlq"+query, nil)
		expect(t, r, http.StatusOK)
		if err := json.Unmarshal(r.Body, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// until waits for the list to show msg's newest dead letter (reason), not replayed.
	until := func(msg, reason string) page {
		t.Helper()
		var p page
		servicetest.Eventually(t, 10*time.Second, msg+" "+reason+" in the DLQ list", func() bool {
			p = list("")
			for _, d := range p.Data {
				if d.MessageID == msg && d.Reason == reason {
					return true
				}
			}
			return false
		})
		return p
	}
	replay := func(body string) int {
		t.Helper()
		r := h.do(http.MethodPost, "/v1/destinations/file-hooks/dlq/replay", body)
		expect(t, r, http.StatusOK)
		return int(r.Data(t)["replayed"].(float64))
	}

	dead("amp-1", "first")
	dead("amp-1", "second")
	dead("amp-1", "third")
	dead("m2", "fourth")
	p := until("m2", "fourth")
	if p.Total != 2 || len(p.Data) != 2 || p.Data[0].MessageID != "m2" || p.Data[1].MessageID != "amp-1" || p.Data[1].Reason != "third" {
		t.Fatalf("DLQ list: %+v, want m2 and amp-1 (its newest dead letter) once each", p)
	}
	if got := b.get("/destinations/file-hooks").Body; !strings.Contains(got, `Dead letters <span class="badge warn">2</span>`) {
		t.Errorf("the destination page does not count 2 dead letters")
	}
	var counts []int
	for i, reason := range []string{"fifth", "sixth", "seventh"} {
		counts = append(counts, replay(`{"messageIds":["amp-1"]}`))
		dead("amp-1", reason) // the replay failed: dead-lettered anew
		if p := until("amp-1", reason); p.Total != 2 {
			t.Fatalf("after replay %d: %+v, want amp-1 and m2 once each", i+1, p)
		}
	}
	counts = append(counts, replay(`{}`), replay(`{}`))
	if want := []int{1, 1, 1, 2, 0}; !slices.Equal(counts, want) {
		t.Errorf("replayed %v, want %v", counts, want)
	}
	if p := list(""); p.Total != 0 {
		t.Errorf("after replaying all: %+v, want nothing left", p)
	}
	if p := list("?replayed=true"); p.Total != 2 || p.Data[0].ReplayedAt == "" || p.Data[1].ReplayedAt == "" {
		t.Errorf("replayed=true: %+v, want amp-1 and m2, replayed", p)
	}
	if got := b.get("/destinations/file-hooks").Body; strings.Contains(got, "Dead letters (") {
		t.Errorf("the destination page still counts dead letters after replaying all")
	}
}

// TestDLQReplaySkipsDeletedUsers: after a user's deletion, replaying the DLQ re-enqueues none of
// the user's dead letters accepted before it (the answer counts them as skipped, with the
// reason), but does replay the user's delete notice and another user's dead letter; a
// suppressed user's dead letters are skipped too
// (docs/console.md#replay-the-dead-letter-queue).
func TestDLQReplaySkipsDeletedUsers(t *testing.T) {
	h := destHarness(t)
	deliveries := h.env.Reader(schemas.TopicDeliveries)
	accepted := schemas.FormatTimestamp(time.Now().Add(-time.Minute))
	dead := func(id, user, typ string) {
		h.env.Produce(&kgo.Record{Topic: schemas.TopicDLQ, Key: []byte("file-hooks:" + user),
			Value: []byte(`{"type":"` + typ + `","messageId":"` + id + `","userId":"` + user + `","traits":{"email":"e@example.com","phone":"+15551234567"},"receivedAt":"` + accepted + `"}`),
			Headers: []kgo.RecordHeader{{Key: schemas.HeaderDestinationID, Value: []byte("file-hooks")}, {Key: schemas.HeaderMessageID, Value: []byte(id)},
				{Key: schemas.HeaderType, Value: []byte(typ)}, {Key: schemas.HeaderReason, Value: []byte("retries_exhausted")}}})
	}
	for _, id := range []string{"gone-1", "gone-2", "gone-3"} {
		dead(id, "u-gone", "identify")
	}
	dead("delete-r1-web", "u-gone", schemas.TypeDelete)
	dead("kept-1", "u-kept", "identify")
	dead("sup-1", "u-sup", "identify")
	h.env.Produce(
		&kgo.Record{Topic: schemas.TopicDeletionsStatus, Key: []byte("r1"), Value: schemas.DeletionStatus{RequestID: "r1", UserID: "u-gone",
			Kind: schemas.KindSuppressWithDelete, Notices: 1, ProcessedAt: schemas.FormatTimestamp(time.Now())}.Record()},
		&kgo.Record{Topic: schemas.TopicSuppressions, Key: []byte("u-sup"), Value: schemas.Suppression{UserID: "u-sup", RequestID: "r2"}.Record()},
	)

	r := h.do(http.MethodPost, "/v1/destinations/file-hooks/dlq/replay", `{}`)
	expect(t, r, http.StatusOK)
	var answer struct {
		Replayed          int      `json:"replayed"`
		MessageIDs        []string `json:"messageIds"`
		Skipped           int      `json:"skipped"`
		SkippedMessageIDs []string `json:"skippedMessageIds"`
		Reason            string   `json:"reason"`
	}
	if err := json.Unmarshal(r.Body, &struct{ Data any }{&answer}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(answer.MessageIDs)
	slices.Sort(answer.SkippedMessageIDs)
	if answer.Replayed != 2 || !slices.Equal(answer.MessageIDs, []string{"delete-r1-web", "kept-1"}) ||
		answer.Skipped != 4 || !slices.Equal(answer.SkippedMessageIDs, []string{"gone-1", "gone-2", "gone-3", "sup-1"}) ||
		answer.Reason != "deleted or suppressed user" {
		t.Fatalf("replay answer %s: want delete-r1-web and kept-1 replayed; gone-1..3 and sup-1 skipped, deleted or suppressed user", r.Body)
	}
	deliveries.Settle = 500 * time.Millisecond
	var got []string
	for _, rec := range deliveries.WaitFor(2, 10*time.Second) {
		got = append(got, servicetest.Header(rec, schemas.HeaderMessageID))
	}
	if slices.Sort(got); !slices.Equal(got, []string{"delete-r1-web", "kept-1"}) {
		t.Errorf("webhooks.deliveries after the replay: %v, want the notice and kept-1 only", got)
	}

	// Asked by id, the deleted user's dead letter is still skipped.
	r = h.do(http.MethodPost, "/v1/destinations/file-hooks/dlq/replay", `{"messageIds":["gone-1"]}`)
	expect(t, r, http.StatusOK)
	if d := r.Data(t); d["replayed"].(float64) != 0 || d["skipped"].(float64) != 1 || d["reason"] != "deleted user" {
		t.Errorf("replay of gone-1 by id: %s, want replayed 0, skipped 1, reason deleted user", r.Body)
	}
}
