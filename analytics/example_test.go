package analytics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/tributary-cdp/tributary/analytics"
)

// exampleIngest stands in for Tributary's ingest: it prints every message it receives, with
// the random messageId and the call-time timestamp masked so that the output is stable.
func exampleIngest() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, _, _ := r.BasicAuth()
		body, _ := io.ReadAll(r.Body)
		var b struct {
			Batch []map[string]any `json:"batch"`
		}
		_ = json.Unmarshal(body, &b)
		fmt.Printf("%s %s (write key %s): %d message(s)\n", r.Method, r.URL.Path, user, len(b.Batch))
		for _, m := range b.Batch {
			m["messageId"] = "<uuid>"
			if ts, err := time.Parse(time.RFC3339, m["timestamp"].(string)); err == nil && time.Since(ts).Abs() < time.Minute {
				m["timestamp"] = "<now>"
			}
			enc := json.NewEncoder(os.Stdout)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(m)
		}
		_, _ = io.WriteString(w, `{"success":true}`)
	}))
}

func Example() {
	ingest := exampleIngest()
	defer ingest.Close()

	client := analytics.New("wk_live_123")
	client.Endpoint = ingest.URL // default http://localhost:8080
	defer client.Close()         // sends what is still queued

	err := client.Track(&analytics.Track{
		UserId:     "user-42",
		Event:      "Order Completed",
		Properties: map[string]any{"revenue": 39.95, "currency": "EUR"},
	})
	if err != nil {
		fmt.Println(err) // a *analytics.ValidationError naming the field, ErrQueueFull, ErrClosed
	}
	// Output:
	// POST /v1/batch (write key wk_live_123): 1 message(s)
	// {"context":{"library":{"name":"tributary-analytics-go","version":"1.0.0"}},"event":"Order Completed","messageId":"<uuid>","properties":{"currency":"EUR","revenue":39.95},"timestamp":"<now>","type":"track","userId":"user-42"}
}

func ExampleClient_Identify() {
	ingest := exampleIngest()
	defer ingest.Close()
	client := analytics.New("wk_live_123")
	client.Endpoint = ingest.URL

	_ = client.Identify(&analytics.Identify{
		UserId: "user-42",
		Traits: map[string]any{"email": "ada@example.com", "plan": "pro"},
	})
	_ = client.Close()
	// Output:
	// POST /v1/batch (write key wk_live_123): 1 message(s)
	// {"context":{"library":{"name":"tributary-analytics-go","version":"1.0.0"}},"messageId":"<uuid>","timestamp":"<now>","traits":{"email":"ada@example.com","plan":"pro"},"type":"identify","userId":"user-42"}
}

func ExampleClient_Track() {
	ingest := exampleIngest()
	defer ingest.Close()
	client := analytics.New("wk_live_123")
	client.Endpoint = ingest.URL

	// A missing required field is reported at once, naming it.
	fmt.Println(client.Track(&analytics.Track{UserId: "user-42"}))

	_ = client.Track(&analytics.Track{
		AnonymousId: "anon-9",
		Event:       "Signed Up",
		Properties:  map[string]any{"source": "newsletter"},
	})
	_ = client.Close()
	// Output:
	// analytics: track: event: required
	// POST /v1/batch (write key wk_live_123): 1 message(s)
	// {"anonymousId":"anon-9","context":{"library":{"name":"tributary-analytics-go","version":"1.0.0"}},"event":"Signed Up","messageId":"<uuid>","properties":{"source":"newsletter"},"timestamp":"<now>","type":"track"}
}

func ExampleClient_Page() {
	ingest := exampleIngest()
	defer ingest.Close()
	client := analytics.New("wk_live_123")
	client.Endpoint = ingest.URL

	_ = client.Page(&analytics.Page{
		UserId:   "user-42",
		Category: "Docs",
		Name:     "Pricing",
		// url, title, referrer and path are recognised; they travel as "properties".
		Traits:  map[string]any{"url": "https://example.com/pricing", "path": "/pricing"},
		Context: map[string]any{"ip": "203.0.113.9"},
	})
	_ = client.Close()
	// Output:
	// POST /v1/batch (write key wk_live_123): 1 message(s)
	// {"category":"Docs","context":{"ip":"203.0.113.9","library":{"name":"tributary-analytics-go","version":"1.0.0"}},"messageId":"<uuid>","name":"Pricing","properties":{"path":"/pricing","url":"https://example.com/pricing"},"timestamp":"<now>","type":"page","userId":"user-42"}
}

func ExampleClient_Screen() {
	ingest := exampleIngest()
	defer ingest.Close()
	client := analytics.New("wk_live_123")
	client.Endpoint = ingest.URL

	_ = client.Screen(&analytics.Screen{AnonymousId: "anon-9", Name: "Cart"})
	_ = client.Close()
	// Output:
	// POST /v1/batch (write key wk_live_123): 1 message(s)
	// {"anonymousId":"anon-9","context":{"library":{"name":"tributary-analytics-go","version":"1.0.0"}},"messageId":"<uuid>","name":"Cart","timestamp":"<now>","type":"screen"}
}

func ExampleClient_Group() {
	ingest := exampleIngest()
	defer ingest.Close()
	client := analytics.New("wk_live_123")
	client.Endpoint = ingest.URL

	_ = client.Group(&analytics.Group{
		UserId:  "user-42",
		GroupId: "acme",
		Traits:  map[string]any{"name": "Acme Inc.", "employees": 420},
	})
	_ = client.Close()
	// Output:
	// POST /v1/batch (write key wk_live_123): 1 message(s)
	// {"context":{"library":{"name":"tributary-analytics-go","version":"1.0.0"}},"groupId":"acme","messageId":"<uuid>","timestamp":"<now>","traits":{"employees":420,"name":"Acme Inc."},"type":"group","userId":"user-42"}
}

func ExampleClient_Alias() {
	ingest := exampleIngest()
	defer ingest.Close()
	client := analytics.New("wk_live_123")
	client.Endpoint = ingest.URL

	_ = client.Alias(&analytics.Alias{UserId: "user-42", PreviousId: "anon-9"})
	_ = client.Close()
	// Output:
	// POST /v1/batch (write key wk_live_123): 1 message(s)
	// {"context":{"library":{"name":"tributary-analytics-go","version":"1.0.0"}},"messageId":"<uuid>","previousId":"anon-9","timestamp":"<now>","type":"alias","userId":"user-42"}
}

// Batching: calls are queued and sent FlushAt at a time (or FlushAfter after the last flush).
func ExampleClient_Flush() {
	ingest := exampleIngest()
	defer ingest.Close()
	client := analytics.New("wk_live_123")
	client.Endpoint = ingest.URL
	client.FlushAt = 2
	defer client.Close()

	for _, event := range []string{"One", "Two", "Three"} {
		_ = client.Track(&analytics.Track{UserId: "user-42", Event: event})
	}
	// "One" and "Two" went as a batch; Flush sends "Three" now and waits for it.
	if err := client.Flush(context.Background()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// POST /v1/batch (write key wk_live_123): 2 message(s)
	// {"context":{"library":{"name":"tributary-analytics-go","version":"1.0.0"}},"event":"One","messageId":"<uuid>","timestamp":"<now>","type":"track","userId":"user-42"}
	// {"context":{"library":{"name":"tributary-analytics-go","version":"1.0.0"}},"event":"Two","messageId":"<uuid>","timestamp":"<now>","type":"track","userId":"user-42"}
	// POST /v1/batch (write key wk_live_123): 1 message(s)
	// {"context":{"library":{"name":"tributary-analytics-go","version":"1.0.0"}},"event":"Three","messageId":"<uuid>","timestamp":"<now>","type":"track","userId":"user-42"}
}

// Selecting destinations (docs/client.md#selecting-destinations) and importing history.
func ExampleIntegrations() {
	ingest := exampleIngest()
	defer ingest.Close()
	client := analytics.New("wk_live_123")
	client.Endpoint = ingest.URL

	_ = client.Track(&analytics.Track{
		UserId: "user-42",
		Event:  "Order Completed",
		// Only the Webhooks destination receives this call.
		Integrations: analytics.Integrations{"All": false, "Webhooks": true},
		// A past time is sent exactly as given.
		Timestamp: analytics.Time(time.Date(2019, 3, 4, 5, 6, 7, 0, time.UTC)),
	})
	_ = client.Close()
	// Output:
	// POST /v1/batch (write key wk_live_123): 1 message(s)
	// {"context":{"library":{"name":"tributary-analytics-go","version":"1.0.0"}},"event":"Order Completed","integrations":{"All":false,"Webhooks":true},"messageId":"<uuid>","timestamp":"2019-03-04T05:06:07.000Z","type":"track","userId":"user-42"}
}

// printOutcome is a Callback that prints each message's outcome.
type printOutcome struct{}

func (printOutcome) Success(m analytics.Message) { fmt.Println("delivered:", m.Type()) }
func (printOutcome) Failure(m analytics.Message, err error) {
	fmt.Println("failed:", m.Type(), err)
}

func ExampleCallback() {
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized) // not retried
	}))
	defer refusing.Close()
	client := analytics.New("wk_wrong")
	client.Endpoint = refusing.URL
	client.Callback = printOutcome{}

	_ = client.Track(&analytics.Track{UserId: "user-42", Event: "Signed Up"})
	_ = client.Close()
	// Output:
	// failed: track analytics: server answered 401: {"error":"unauthorized"}
}

// Producing straight to Kafka (tracking.inbound) from inside the Kafka network.
func ExampleKafkaTransport() {
	client := analytics.New("wk_live_123")
	client.Kafka = &analytics.KafkaTransport{Brokers: []string{"kafka-1:9092", "kafka-2:9092"}}
	defer client.Close()

	_ = client.Track(&analytics.Track{UserId: "user-42", Event: "Order Completed"})
}
