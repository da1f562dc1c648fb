package deliverer

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// BenchmarkPost is one webhook POST as an attempt makes it (signed, two static headers) to a
// loopback endpoint that answers 200 at once: the deliverer's HTTP cost per webhook.
func BenchmarkPost(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	client := testHTTPClient(b, nil)
	dest := &schemas.Destination{ID: "d", Settings: schemas.DestinationSettings{SharedSecret: "s3cret",
		Webhooks: []schemas.Webhook{{URL: srv.URL + "/hook", Headers: map[string]string{"X-Team": "growth", "X-Env": "prod"}}}}}
	body := []byte(`{"version":1,"type":"track","messageId":"m-1","userId":"u-1","event":"Order Completed","properties":{"total":42.5,"currency":"EUR"},"context":{"library":{"name":"analytics.js","version":"2.11.1"}},"timestamp":"2026-01-02T03:04:05.678Z"}`)
	rq := &request{dest: dest, entries: dest.Settings.Webhooks, messageID: "m-1", body: body}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if res := post(context.Background(), client, 5*time.Second, rq, time.Now()); res[0].Class != Success {
				b.Fatal(res[0].Err)
			}
		}
	})
}
