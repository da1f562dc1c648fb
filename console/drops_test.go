package console_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestDeliveryLogCountsDrops: the attempt-log lines of records the deliverer dropped unsent
// because their user is suppressed or deleted (docs/delivery.md#deleted-and-suppressed-users)
// are counted under their own classes in the stats, and filtered by them.
func TestDeliveryLogCountsDrops(t *testing.T) {
	h := newHarness(t, nil)
	now := time.Now().UTC()
	drop := func(msg, class string) *kgo.Record {
		return &kgo.Record{Topic: schemas.TopicAttempts, Key: []byte("file-hooks"), Value: []byte(`{"destinationId":"file-hooks","messageId":"` + msg +
			`","url":"","attempt":2,"status":0,"latencyMs":0,"errorClass":"` + class + `","error":"` + class + `: user ` + class + `","concurrencyLimit":0,"at":"` + schemas.FormatTimestamp(now) + `"}`)}
	}
	h.env.Produce(drop("m1", "deleted"), drop("m2", "deleted"), drop("m3", "suppressed"),
		&kgo.Record{Topic: schemas.TopicAttempts, Key: []byte("file-hooks"), Value: attemptJSON("file-hooks", "m4", "http://127.0.0.1:9/file", 1, 200, 5, "ok", now)})
	var failures map[string]any
	servicetest.Eventually(t, 5*time.Second, "the drops in the stats", func() bool {
		st := h.do(http.MethodGet, "/v1/destinations/file-hooks/stats?window=1h", nil)
		expect(t, st, http.StatusOK)
		failures = st.Data(t)["failures"].(map[string]any)
		return st.Data(t)["attempts"] == float64(4)
	})
	if failures["deleted"] != float64(2) || failures["suppressed"] != float64(1) || failures["other"] != nil {
		t.Fatalf("failures by class %v: want deleted 2, suppressed 1, none as other", failures)
	}
	r := h.do(http.MethodGet, "/v1/destinations/file-hooks/attempts?status=deleted", nil)
	expect(t, r, http.StatusOK)
	if n := len(r.JSON(t)["data"].([]any)); n != 2 {
		t.Errorf("?status=deleted: %d attempts, want 2: %s", n, r.Body)
	}
}
