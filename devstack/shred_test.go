package devstack_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/devstack"
	"github.com/tributary-cdp/tributary/schemas"
)

// readAll reads every record of every topic matching re, raw (no keyring), until none came for
// a second.
func readAll(t *testing.T, st *devstack.Stack, re string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers()...), kgo.ConsumeRegex(), kgo.ConsumeTopics(re),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := fs.NumRecords()
		out = append(out, fs.Records()...)
		if n == 0 && ctx.Err() != nil {
			return out
		}
	}
}

// TestEndToEndNothingReadable plants a user's email and card number in the events the stack
// takes, with SHRED_EVENTS on (its default), and reads every topic raw: no record value nor
// header holds them — tracking.events, tracking.rejected, webhooks.deliveries, the retry tiers,
// the DLQ, audiences.state and audiences.repartition alike — while the webhooks arrive with
// them in clear. A deletion then shreds the user's key (keysShredded in its status).
func TestEndToEndNothingReadable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	rc := &hook{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer down.Close()
	st := startStack(t, srv.URL+"/segment", func(c *devstack.Config) { c.Audiences.SyncInterval = time.Second }, withConfig(t, `  - id: down
    type: webhooks
    sources: [web]
    settings: {webhooks: [{url: "`+down.URL+`"}]}
computedTraits:
  - id: orders
    name: Orders Placed
    source: web
    count: {event: Order Completed}
`))
	if !devstack.DefaultConfig().Kafka.ShredEvents {
		t.Fatal("SHRED_EVENTS is off by default")
	}
	const email, card = "jane.planted@example.com", "4242424242424242"
	post(t, st, "/v1/identify", `{"userId":"jane","traits":{"email":"`+email+`"},"messageId":"e2e-id"}`)
	post(t, st, "/v1/track", `{"userId":"jane","event":"Order Completed","properties":{"card":"`+card+`"},"messageId":"e2e-order"}`)
	post(t, st, "/v1/batch", `{"batch":[{"type":"track","userId":"jane","properties":{"email":"`+email+`"}}]}`) // rejected: no event
	_, bodies := rc.wait(t, 3)                                                                                  // identify, track, and the computed trait's identify
	if joined := bytes.Join(bodies, nil); !bytes.Contains(joined, []byte(email)) || !bytes.Contains(joined, []byte(card)) {
		t.Fatalf("the webhooks do not carry the user's data in clear: %s", joined)
	}
	// The down destination's deliveries go through both retry tiers to the DLQ.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n := len(readAll(t, st, `^`+regexp.QuoteMeta(schemas.TopicDLQ)+`$`)); n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no dead letters of the down destination")
		}
	}
	seen := map[string]int{}
	for _, r := range readAll(t, st, `^(tracking|webhooks|audiences)\..*`) {
		seen[r.Topic]++
		for _, b := range append([][]byte{r.Value}, headerValues(r)...) {
			if bytes.Contains(b, []byte(email)) || bytes.Contains(b, []byte(card)) {
				t.Errorf("%s partition %d offset %d holds the user's data in clear: %q", r.Topic, r.Partition, r.Offset, r.Value)
			}
		}
	}
	for _, topic := range []string{schemas.TopicEvents, schemas.TopicRejected, schemas.TopicDeliveries, schemas.RetryTopic(time.Second),
		schemas.RetryTopic(2 * time.Second), schemas.TopicDLQ, schemas.TopicAudiencesState} {
		if seen[topic] == 0 {
			t.Errorf("%s has no record: the test did not look at it", topic)
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(st.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: schemas.TopicDeletions, Key: []byte("jane"), Value: []byte(`{"userId":"jane","requestId":"e2e-forget"}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		var status *schemas.DeletionStatus
		for _, r := range readAll(t, st, `^`+regexp.QuoteMeta(schemas.TopicDeletionsStatus)+`$`) {
			if _, s, err := schemas.DecodeDeletionStatusRecord(r.Value); err == nil && s != nil && s.RequestID == "e2e-forget" {
				status = s // the router's status, not another store's report
			}
		}
		if status != nil {
			if status.KeysShredded < 1 {
				t.Fatalf("status %+v: no key shredded", status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no deletion status")
		}
	}
}

func headerValues(r *kgo.Record) [][]byte {
	out := make([][]byte, len(r.Headers))
	for i, h := range r.Headers {
		out[i] = h.Value
	}
	return out
}
