package deliverer_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/schemas"
)

// A test delivery (header test: 1, the console's event tester) is POSTed once to every URL of
// the destination, even when one answers 2xx, and never retried nor dead-lettered; each POST
// gives one webhooks.attempts record with "test":true. A disabled destination is tested too.
func TestTestDelivery(t *testing.T) {
	failing := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) })
	ok := newReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) {})
	disabled := strings.Replace(dest("a", []string{failing.URL + "/500", ok.URL + "/200"}, ", sharedSecret: s3cret"), "type: webhooks", "type: webhooks\n    enabled: false", 1)
	h := newHarness(t, "1s", destYAML(disabled))
	attempts := h.reader(schemas.TopicAttempts)
	tier := h.reader(schemas.RetryTopic(time.Second))
	dlq := h.reader(schemas.TopicDLQ)
	reg, _ := h.run(h.config())
	recs := deliveryRecords("a", "test-1")
	recs[0].Headers = append(recs[0].Headers, kgo.RecordHeader{Key: schemas.HeaderTest, Value: []byte("1")})
	h.env.Produce(recs...)

	got := attempts.waitFor(2, 10*time.Second)
	urls := map[string]int{}
	for _, r := range got {
		var a struct {
			DestinationID, MessageID, URL, ErrorClass string
			Status                                    int
			Test                                      bool
		}
		if err := json.Unmarshal(r.Value, &a); err != nil || !a.Test || a.MessageID != "test-1" || a.DestinationID != "a" {
			t.Errorf("attempt record %s (%v)", r.Value, err)
		}
		urls[a.URL] = a.Status
	}
	if len(urls) != 2 || urls[failing.URL+"/500"] != 500 || urls[ok.URL+"/200"] != 200 {
		t.Errorf("attempts per URL %v, want one 500 and one 200", urls)
	}
	for _, rc := range []*receiver{failing, ok} {
		reqs := rc.waitRequests(t, 1, 5*time.Second)
		if reqs[0].header.Get("X-Signature") != schemas.XSignature("s3cret", reqs[0].body) || reqs[0].header.Get("X-Message-Id") != "test-1" {
			t.Errorf("test POST headers %v", reqs[0].header)
		}
	}
	time.Sleep(2 * time.Second) // a retry would be due after 1 s
	if n := len(failing.requests()) + len(ok.requests()); n != 2 {
		t.Errorf("%d POSTs, want 2 (no retry)", n)
	}
	tier.Poll()
	dlq.Poll()
	if len(tier.Got) != 0 || len(dlq.Got) != 0 {
		t.Errorf("a test delivery went to a retry tier (%d) or the DLQ (%d)", len(tier.Got), len(dlq.Got))
	}
	if n := counter(t, reg, "tributary_deliverer_attempts_total", "destination", "a"); n != 2 {
		t.Errorf("attempts metric %v, want 2", n)
	}
	if n := counter(t, reg, "tributary_deliverer_delivered_total", "destination", "a"); n != 0 {
		t.Errorf("delivered metric %v, want 0 (a test is not a delivery)", n)
	}
}
