package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestDLQCommands: `dlq list` shows each dead letter (when, destination, message id, reason,
// last status), `replay -dry-run` replays nothing, `replay` marks what it replayed so that the
// same replay again sends nothing, and an unknown destination is an error naming the ones
// there are.
func TestDLQCommands(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{Config: `
sources: [{id: web, writeKey: wk}]
destinations:
  - {id: order-hooks, type: webhooks, sources: [web], settings: {webhooks: [{url: "https://hooks.example.com/in"}]}}
`})
	t.Setenv("KAFKA_BROKERS", strings.Join(e.Kafka.Brokers, ","))
	t.Setenv("LOG_LEVEL", "error")
	var dead []*kgo.Record
	for _, id := range []string{"m1", "m2"} {
		dead = append(dead, &kgo.Record{Topic: schemas.TopicDLQ, Key: []byte("order-hooks:u1"), Value: []byte(`{}`), Headers: []kgo.RecordHeader{
			{Key: schemas.HeaderDestinationID, Value: []byte("order-hooks")}, {Key: schemas.HeaderMessageID, Value: []byte(id)},
			{Key: schemas.HeaderReason, Value: []byte("status_4xx")}, {Key: schemas.HeaderLastStatus, Value: []byte("410")}}})
	}
	e.Produce(dead...)

	var out bytes.Buffer
	if err := list(nil, &out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); strings.Count(s, "order-hooks") != 2 || !strings.Contains(s, "m1") || !strings.Contains(s, "status_4xx") || !strings.Contains(s, "410") {
		t.Errorf("dlq list:\n%s", s)
	}
	out.Reset()
	if err := replay([]string{"-destination", "order-hooks", "-dry-run"}, &out); err != nil || !strings.Contains(out.String(), "would replay 2 dead letters") {
		t.Fatalf("replay -dry-run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"replayed 2 dead letters", "replayed 0 dead letters"} {
		out.Reset()
		if err := replay([]string{"-destination", "order-hooks"}, &out); err != nil || !strings.Contains(out.String(), want) {
			t.Fatalf("replay: %v\n%s\nwant %q", err, out.String(), want)
		}
	}
	out.Reset()
	if err := list([]string{"-all"}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("dlq list -all after the replay: %d lines, want a header and 2:\n%s", len(lines), out.String())
	}
	for _, l := range lines[1:] {
		if strings.HasSuffix(strings.TrimSpace(l), " -") {
			t.Errorf("dlq list -all: %q has no replay time", l)
		}
	}
	out.Reset()
	if err := list(nil, &out); err != nil || strings.Contains(out.String(), "order-hooks") {
		t.Errorf("dlq list after the replay lists replayed dead letters without -all: %v\n%s", err, out.String())
	}
	err := replay([]string{"-destination", "orders-hooks"}, &out)
	if err == nil || !strings.Contains(err.Error(), "no such destination") || !strings.Contains(err.Error(), "order-hooks") {
		t.Errorf("replay of an unknown destination: %v", err)
	}
}
