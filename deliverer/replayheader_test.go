package deliverer_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// A delivery record with the replay header (the console's replays, docs/delivery.md#replay) is
// POSTed with X-Tributary-Replay: <replayId> and its messageId unchanged; its attempt records
// carry the replayId; a record without the header gets no such header.
func TestReplayHeader(t *testing.T) {
	recv := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) {})
	h := newHarness(t, "1s", destYAML(dest("a", []string{recv.URL}, "")))
	attempts := h.reader(schemas.TopicAttempts)
	h.run(h.config())
	recs := deliveryRecords("a", "r1", "plain")
	recs[0].Headers = append(recs[0].Headers, kgo.RecordHeader{Key: schemas.HeaderReplay, Value: []byte("rp-1")})
	h.env.Produce(recs...)
	reqs := recv.waitRequests(t, 2, 10*time.Second)
	for _, r := range reqs {
		id, replay := r.header.Get("X-Message-Id"), r.header.Get(schemas.HeaderXTributaryReplay)
		if (id == "r1" && replay != "rp-1") || (id == "plain" && replay != "") {
			t.Errorf("message %s: X-Tributary-Replay %q", id, replay)
		}
	}
	for _, r := range attempts.waitFor(2, 10*time.Second) {
		a, err := schemas.DecodeAttemptRecord(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{"r1": "rp-1"}[a.MessageID]; a.ReplayID != want || (want == "") == strings.Contains(string(r.Value), "replayId") {
			t.Errorf("attempt record of %s: replayId %q, want %q (%s)", a.MessageID, a.ReplayID, want, r.Value)
		}
	}
}
