package devstack_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// TestEndToEndDestinationFilters runs the whole stack (as make run does) with destination
// filters (docs/routing.md#destination-filters): a debug event is dropped, the client's IP is
// stripped from what the destination gets, and the other destination of the source, without
// filters, gets every message whole; the console's funnel counts the drop under the filter
// that made it.
func TestEndToEndDestinationFilters(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	st, rc := stackWithConfig(t, func(url string) string {
		return `sources:
  - {id: web, writeKey: wk_e2e}
destinations:
  - id: filtered
    type: webhooks
    sources: [web]
    settings: {webhooks: [{url: "` + url + `/filtered"}]}
    filters:
      - {name: no debug, if: "match(event, 'Debug *')", action: drop}
      - {name: no ip, action: dropProperties, properties: [context.ip]}
  - {id: whole, type: webhooks, sources: [web], settings: {webhooks: [{url: "` + url + `/whole"}]}}
`
	})
	post(t, st, "/v1/track", `{"userId":"u1","event":"Debug Render","messageId":"e2e-debug","context":{"ip":"203.0.113.9"}}`)
	post(t, st, "/v1/track", `{"userId":"u1","event":"Order Completed","properties":{"total":12},"messageId":"e2e-order","context":{"ip":"203.0.113.9"}}`)
	rc.wait(t, 3)
	time.Sleep(500 * time.Millisecond) // a fourth webhook (the dropped one) would come by now
	reqs, bodies := rc.wait(t, 3)
	got := map[string]bool{}
	for i, r := range reqs {
		var m struct {
			MessageID string `json:"messageId"`
			Context   struct {
				IP *string `json:"ip"`
			} `json:"context"`
		}
		if err := json.Unmarshal(bodies[i], &m); err != nil {
			t.Fatal(err)
		}
		got[r.URL.Path+" "+m.MessageID] = true
		if stripped := m.Context.IP == nil; stripped != (r.URL.Path == "/filtered") {
			t.Errorf("%s got %s: context.ip stripped %v", r.URL.Path, bodies[i], stripped)
		}
	}
	for _, want := range []string{"/filtered e2e-order", "/whole e2e-order", "/whole e2e-debug"} {
		if !got[want] {
			t.Errorf("no webhook %s; got %v", want, got)
		}
	}
	if len(reqs) != 3 {
		t.Errorf("%d webhooks, want 3 (the debug event dropped for /filtered): %v", len(reqs), got)
	}

	// The console's funnel counts the drop under the filter that made it.
	token, _ := st.ConsoleToken()
	var last string
	for until := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		a := servicetest.Call(t, http.MethodGet, "http://"+st.ConsoleAddr()+"/v1/destinations/filtered/overview", "", "Authorization", servicetest.Bearer(token))
		var f struct {
			Data struct {
				Dropped struct {
					Reasons []struct {
						Reason, Filter   string
						Count            int
						SampleMessageIDs []string `json:"sampleMessageIds"`
					}
				}
			}
		}
		a.Decode(t, &f)
		if r := f.Data.Dropped.Reasons; len(r) == 1 && r[0].Reason == "destination_filter" && r[0].Filter == "no debug" && r[0].Count == 1 &&
			slices.Equal(r[0].SampleMessageIDs, []string{"e2e-debug"}) {
			break
		}
		if last = string(a.Body); time.Now().After(until) {
			t.Fatalf("the funnel's drops: %s, want one of destination_filter by no debug", last)
		}
	}
}
