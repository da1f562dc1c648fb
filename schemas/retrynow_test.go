package schemas_test

import (
	"testing"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestRetryNowWire: a retry-now mark and the name of its tier record round-trip
// (docs/topics.md#webhooksretried-now); names that are none are refused.
func TestRetryNowWire(t *testing.T) {
	key := schemas.RetryNowKey("webhooks.retry.1m30s", 3, 1042)
	if key != "webhooks.retry.1m30s:3:1042" {
		t.Fatalf("key %q", key)
	}
	topic, p, o, ok := schemas.ParseRetryNowKey(key)
	if !ok || topic != "webhooks.retry.1m30s" || p != 3 || o != 1042 {
		t.Errorf("parsed %q %d %d %v", topic, p, o, ok)
	}
	for _, bad := range []string{"", "x", "t:1", ":1:2", "t:-1:2", "t:1:x", "t:1:-2"} {
		if _, _, _, ok := schemas.ParseRetryNowKey(bad); ok {
			t.Errorf("%q parsed as a tier record's name", bad)
		}
	}
	m := schemas.RetryNowMark{State: schemas.RetryNowDelivered, DestinationID: "d", MessageID: "m", At: "2026-11-27T10:00:01.123Z", DueAt: "2026-11-27T10:04:12.000Z"}
	got, err := schemas.DecodeRetryNowMark(m.Record())
	if err != nil || got != m {
		t.Errorf("round trip: %+v, %v", got, err)
	}
	if string(m.Record()) != `{"state":"delivered","destinationId":"d","messageId":"m","at":"2026-11-27T10:00:01.123Z","dueAt":"2026-11-27T10:04:12.000Z"}` {
		t.Errorf("encoded %s", m.Record())
	}
	if _, err := schemas.DecodeRetryNowMark([]byte(`{"state":1}`)); err == nil {
		t.Error("a state that is not a string decoded")
	}
}
