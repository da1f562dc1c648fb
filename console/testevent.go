package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// The event tester: POST /v1/destinations/{id}/test writes a sample message of the chosen type
// to webhooks.deliveries with the header test: 1. The deliverer sends it through its real path
// (signing, headers, the address guard) to every URL of the destination, never retries it, and
// logs one attempt per URL; the console waits for those attempts and answers them.

// testRequest is the body of the test endpoint.
type testRequest struct {
	// Type is the message type: track (default), identify, page, screen, group, alias or delete.
	Type string `json:"type"`
	// WhileDisabled lets a disabled destination be tested (the UI's setup flow: test the URLs,
	// then enable; the deliverer sends test events to a disabled destination too). The API
	// answers 409 for a disabled destination.
	WhileDisabled bool `json:"-"`
}

// testMessagePrefix starts a test message's id.
const testMessagePrefix = "test-"

var testTypes = []string{schemas.TypeTrack, schemas.TypeIdentify, schemas.TypePage, schemas.TypeScreen, schemas.TypeGroup, schemas.TypeAlias, schemas.TypeDelete}

// testResult is what one URL answered.
type testResult struct {
	URL        string  `json:"url"`
	Status     int     `json:"status"`
	LatencyMs  float64 `json:"latencyMs"`
	ErrorClass string  `json:"errorClass"`
	Error      string  `json:"error,omitempty"`
}

// sampleMessage is a Segment message of type typ, as a client would send it.
func sampleMessage(typ, messageID string, now time.Time) []byte {
	ts := schemas.FormatTimestamp(now)
	m := map[string]any{
		"type": typ, "messageId": messageID, "userId": "test-user-1", "anonymousId": "test-anonymous-1",
		"timestamp": ts, "sentAt": ts, "receivedAt": ts,
		"context": map[string]any{"library": map[string]any{"name": "tributary-console", "version": platform.Version}},
	}
	switch typ {
	case schemas.TypeTrack:
		m["event"] = "Test Event"
		m["properties"] = map[string]any{"source": "Tributary console event tester"}
	case schemas.TypeIdentify:
		m["traits"] = map[string]any{"name": "Test User", "email": "test-user-1@example.com"}
	case schemas.TypePage, schemas.TypeScreen:
		m["name"] = "Test Page"
		m["properties"] = map[string]any{"title": "Tributary console event tester"}
	case schemas.TypeGroup:
		m["groupId"] = "test-group-1"
		m["traits"] = map[string]any{"name": "Test Group"}
	case schemas.TypeAlias:
		m["previousId"] = "test-anonymous-1"
	}
	b, _ := json.Marshal(m)
	return b
}

// testOutcome is the answer of a destination test.
type testOutcome struct {
	MessageID string          `json:"messageId"`
	Type      string          `json:"type"`
	Body      json.RawMessage `json:"body"`
	Results   []testResult    `json:"results"`
	At        time.Time       `json:"-"` // when it was sent: its body's timestamps
}

// testBody is the webhook body of a test message of type typ with id messageID sent at now
// (the same for the same three: the UI shows it again after its redirect).
func testBody(typ, messageID string, now time.Time) ([]byte, error) {
	if typ == schemas.TypeDelete {
		return schemas.AppendDeleteBody(nil, "test-user-1", now), nil
	}
	m, err := schemas.DecodeMessage(sampleMessage(typ, messageID, now))
	if err != nil {
		return nil, fmt.Errorf("sample %s message: %w", typ, err)
	}
	return schemas.AppendWebhookBody(nil, m), nil
}

func (s *Service) testDestination(w http.ResponseWriter, r *http.Request) error {
	var req testRequest
	if err := decodeJSON(w, r, &req, true); err != nil {
		return err
	}
	out, err := s.runTest(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeData(w, http.StatusOK, out)
	return nil
}

// runTest sends a sample message to every URL of the destination through the deliverer and
// waits for what each answered (TestTimeout at most).
func (s *Service) runTest(ctx context.Context, id string, req testRequest) (*testOutcome, error) {
	d, ok := s.deps.Store.Snapshot().DestinationByID(id)
	if !ok {
		return nil, errNotFound("no destination %q", id)
	}
	if req.Type == "" {
		req.Type = schemas.TypeTrack
	}
	if !slices.Contains(testTypes, req.Type) {
		return nil, errInvalid("type", "type: must be one of %v, got %q", testTypes, req.Type)
	}
	if !d.IsEnabled() && !req.WhileDisabled {
		return nil, &apiError{Status: http.StatusConflict, Code: codeConflict, Message: fmt.Sprintf("destination %s is disabled: the deliverer sends nothing to it (enable it first)", id)}
	}
	// To the millisecond, as its timestamps say: the UI builds the same body again from it.
	now := s.now().Truncate(time.Millisecond)
	messageID := testMessagePrefix + uuid.NewString()
	body, err := testBody(req.Type, messageID, now)
	if err != nil {
		return nil, err
	}
	urls := make([]string, len(d.Settings.Webhooks))
	for i, wh := range d.Settings.Webhooks {
		urls[i] = schemas.RedactURL(wh.URL)
	}
	// What each URL answered, in the order of their attempts; two entries may have one URL.
	want := map[string]int{}
	for _, u := range urls {
		want[u]++
	}
	results := map[string][]testResult{}
	received := 0
	got := make(chan attempt, len(urls)*2)
	stop := s.attempts.Wait(messageID, got)
	defer stop()
	rec := &kgo.Record{Topic: s.cfg.DeliveriesTopic, Key: []byte(id + ":test-user-1"), Value: body, Headers: []kgo.RecordHeader{
		{Key: schemas.HeaderDestinationID, Value: []byte(id)},
		{Key: schemas.HeaderMessageID, Value: []byte(messageID)},
		{Key: schemas.HeaderAttempt, Value: []byte("1")},
		{Key: schemas.HeaderFirstAttemptAt, Value: []byte(schemas.FormatTimestamp(now))},
		{Key: schemas.HeaderType, Value: []byte(req.Type)},
		{Key: schemas.HeaderTest, Value: []byte("1")},
	}}
	if err := s.producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return nil, fmt.Errorf("writing %s: %w", s.cfg.DeliveriesTopic, err)
	}
	s.metrics.tests.Inc()
	timeout := time.NewTimer(s.cfg.TestTimeout)
	defer timeout.Stop()
wait:
	for received < len(urls) {
		select {
		case a := <-got:
			if len(results[a.URL]) < want[a.URL] {
				results[a.URL] = append(results[a.URL], testResult{URL: a.URL, Status: a.Status, LatencyMs: a.LatencyMs, ErrorClass: a.ErrorClass, Error: a.Error})
				received++
			}
		case <-timeout.C:
			break wait
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	out := make([]testResult, 0, len(urls))
	used := map[string]int{}
	for _, u := range urls {
		if n := used[u]; n < len(results[u]) {
			out = append(out, results[u][n])
			used[u]++
		} else {
			out = append(out, testResult{URL: u, ErrorClass: "pending",
				Error: fmt.Sprintf("no attempt logged within %s: is the deliverer running? (the delivery log shows it when it happens)", s.cfg.TestTimeout)})
		}
	}
	return &testOutcome{MessageID: messageID, Type: req.Type, Body: json.RawMessage(body), Results: out, At: now}, nil
}
