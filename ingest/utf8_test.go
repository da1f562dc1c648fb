package ingest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestInvalidUTF8BecomesReplacementCharacter: invalid UTF-8 anywhere in a message — the userId
// (the Kafka key comes from it), the event name, a property value, a property key — becomes
// U+FFFD, the one rule for every string. Before, userId and event were repaired by the decoder
// while properties were forwarded as they came, so the record (and the webhook body) was not
// valid JSON and the Kafka key kept the raw bytes.
func TestInvalidUTF8BecomesReplacementCharacter(t *testing.T) {
	h := newHarness(t)
	body := "{\"type\":\"track\",\"userId\":\"u\xff1\",\"event\":\"Sign\xc3 Up\",\"messageId\":\"m-utf8\"," +
		"\"properties\":{\"plan\":\"pro\xfe\",\"k\xed\xa0\x80\":[\"x\xc3\",1]}}"
	if status, resp := h.post("/v1/track", []byte(body), basic(testKey)); status != http.StatusOK {
		t.Fatalf("POST: %d %s", status, resp)
	}
	rec := consume(t, h.brokers, schemas.TopicEvents, 1)[0]
	if !utf8.Valid(rec.Value) || !json.Valid(rec.Value) {
		t.Fatalf("record value is not valid UTF-8 JSON: %q", rec.Value)
	}
	if !utf8.Valid(rec.Key) {
		t.Errorf("record key is not valid UTF-8: %q", rec.Key)
	}
	var m struct {
		UserID     string         `json:"userId"`
		Event      string         `json:"event"`
		Properties map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(rec.Value, &m); err != nil {
		t.Fatal(err)
	}
	if m.UserID != "u\uFFFD1" || m.Event != "Sign\uFFFD Up" || m.Properties["plan"] != "pro\uFFFD" {
		t.Errorf("userId %q event %q plan %q: want U+FFFD where the bad bytes were", m.UserID, m.Event, m.Properties["plan"])
	}
	if _, ok := m.Properties["k\uFFFD\uFFFD\uFFFD"]; !ok {
		t.Errorf("property key not repaired: %v", m.Properties)
	}
	if !strings.Contains(string(rec.Key), "\uFFFD") {
		t.Errorf("record key %q: want the repaired userId in it", rec.Key)
	}
}
