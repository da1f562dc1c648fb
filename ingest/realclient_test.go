package ingest

import (
	"sync/atomic"
	"testing"
	"time"

	segment "gopkg.in/segmentio/analytics-go.v3"

	"github.com/tributary-cdp/tributary/schemas"
)

type countingCallback struct{ ok, failed atomic.Int32 }

func (c *countingCallback) Success(segment.Message)        { c.ok.Add(1) }
func (c *countingCallback) Failure(segment.Message, error) { c.failed.Add(1) }

// TestSegmentAnalyticsGoV3 points Segment's own Go client (gopkg.in/segmentio/analytics-go.v3
// v3.1.0), unmodified, at ingest: every call arrives on tracking.events, enriched.
func TestSegmentAnalyticsGoV3(t *testing.T) {
	h := newHarness(t)
	cb := &countingCallback{}
	client, err := segment.NewWithConfig(testKey, segment.Config{
		Endpoint:  h.srv.URL,
		Interval:  50 * time.Millisecond,
		BatchSize: 100,
		Callback:  cb,
	})
	if err != nil {
		t.Fatal(err)
	}
	past := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	calls := []segment.Message{
		segment.Identify{UserId: "go-1", Traits: segment.NewTraits().SetEmail("a@example.com").Set("friends", 29)},
		segment.Track{UserId: "go-2", Event: "Order Completed", Properties: segment.NewProperties().SetRevenue(27.5)},
		segment.Page{AnonymousId: "go-3", Name: "Pricing", Properties: segment.NewProperties().SetURL("https://example.com/pricing")},
		segment.Screen{UserId: "go-4", Name: "Home"},
		segment.Group{UserId: "go-5", GroupId: "g-1", Traits: segment.NewTraits().SetName("Initech")},
		segment.Alias{UserId: "go-6", PreviousId: "anon-6"},
		segment.Track{UserId: "go-7", Event: "Imported", Timestamp: past, Integrations: segment.NewIntegrations().DisableAll().Enable("Webhooks")},
	}
	for _, c := range calls {
		if err := client.Enqueue(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	if cb.ok.Load() != int32(len(calls)) || cb.failed.Load() != 0 {
		t.Fatalf("client callbacks: %d ok, %d failed", cb.ok.Load(), cb.failed.Load())
	}
	recs := consume(t, h.brokers, schemas.TopicEvents, len(calls))
	byKey := map[string]map[string]any{}
	for _, r := range recs {
		if header(r, schemas.HeaderSourceID) != "web" {
			t.Errorf("source-id %q", header(r, schemas.HeaderSourceID))
		}
		byKey[string(r.Key)] = decodeValue(t, r)
	}
	for key, typ := range map[string]string{"go-1": "identify", "go-2": "track", "go-3": "page", "go-4": "screen", "go-5": "group", "go-6": "alias", "go-7": "track"} {
		m := byKey[key]
		if m == nil {
			t.Fatalf("no record for %s", key)
		}
		if m["type"] != typ || m["messageId"] == nil || m["receivedAt"] == nil || m["sentAt"] == nil {
			t.Errorf("%s: %v", key, m)
		}
		lib := m["context"].(map[string]any)["library"].(map[string]any)
		if lib["name"] != "analytics-go" || m["context"].(map[string]any)["ip"] != "127.0.0.1" {
			t.Errorf("%s: context %v", key, m["context"])
		}
	}
	if byKey["go-7"]["originalTimestamp"] != "2025-03-04T05:06:07.000Z" {
		t.Errorf("historical timestamp: %v", byKey["go-7"])
	}
	// analytics-go v3 writes the catch-all in lower case ("all"); the router accepts both.
	if in := byKey["go-7"]["integrations"].(map[string]any); in["all"] != false || in["Webhooks"] != true {
		t.Errorf("integrations %v", in)
	}
	if byKey["go-6"]["previousId"] != "anon-6" {
		t.Errorf("alias %v", byKey["go-6"])
	}
}
