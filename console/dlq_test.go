package console_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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
		waitFor(t, 10*time.Second, msg+" "+reason+" in the DLQ list", func() bool {
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
	if got := b.get("/destinations/file-hooks").Body; !strings.Contains(got, "Dead letters (2)") {
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
