package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/platform/shred"
)

// TestTail prints records as JSON lines — key, headers, a JSON value as JSON, any other value
// as a string, a tombstone as null — from the beginning, stopping after -n; without
// -from-beginning only what is written after it starts.
func TestTail(t *testing.T) {
	brokers := kafkatest.Embedded(t)
	t.Setenv("KAFKA_BROKERS", strings.Join(brokers, ","))
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topic = "tail.test"
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	recs := []*kgo.Record{
		{Topic: topic, Key: []byte("user-1"), Value: []byte(`{"type":"track","event":"E"}`),
			Headers: []kgo.RecordHeader{{Key: "source-id", Value: []byte("web")}, {Key: "message-id", Value: []byte("m1")}}},
		{Topic: topic, Key: []byte("user-2"), Value: []byte("not json")},
		{Topic: topic, Key: []byte("source/web")},
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if err := runTail(ctx, []string{topic, "-from-beginning", "-n", "3"}, &out, &errOut); err != nil {
		t.Fatalf("tail: %v (%s)", err, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), out.String())
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatalf("line 1 is not JSON: %s", lines[0])
	}
	value, _ := first["value"].(map[string]any)
	headers, _ := first["headers"].(map[string]any)
	if first["key"] != "user-1" || value["event"] != "E" || headers["source-id"] != "web" || headers["message-id"] != "m1" || first["topic"] != topic {
		t.Errorf("line 1: %s", lines[0])
	}
	if !strings.Contains(lines[1], `"value":"not json"`) || !strings.Contains(lines[2], `"value":null`) {
		t.Errorf("lines 2 and 3: %s / %s", lines[1], lines[2])
	}

	// From the end: only a record written after tail started.
	out.Reset()
	done := make(chan error, 1)
	go func() { done <- runTail(ctx, []string{topic, "-n", "1"}, &out, &errOut) }()
	// Records keep coming (tail may not have found the end yet when the first is written).
	var err2 error
	for err2 == nil {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("later"), Value: []byte(`1`)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		select {
		case err2 = <-done:
			if err2 != nil {
				t.Fatal(err2)
			}
			err2 = errors.New("done")
		case <-time.After(200 * time.Millisecond):
		}
	}
	if got := strings.TrimSpace(out.String()); !strings.Contains(got, `"key":"later"`) || strings.Count(got, "\n") != 0 {
		t.Errorf("tail from the end printed %s, want only the later record", got)
	}
	if err := runTail(ctx, nil, &out, &errOut); err == nil || !strings.Contains(err.Error(), "which topic") {
		t.Errorf("tail without a topic: %v", err)
	}
}

// TestTailOpensSealedRecords: a record sealed with its user's data key is printed opened
// ("sealed":"opened"); once the key is shredded, with a null value ("sealed":"shredded");
// -sealed prints the value as stored.
func TestTailOpensSealedRecords(t *testing.T) {
	brokers := kafkatest.Embedded(t)
	t.Setenv("KAFKA_BROKERS", strings.Join(brokers, ","))
	kafka, err := platform.LoadKafkaSettings()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const topic = "tail.sealed"
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	keys, err := shred.New(shred.Config{Kafka: kafka})
	if err != nil {
		t.Fatal(err)
	}
	kctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- keys.Run(kctx) }()
	defer func() { stop(); <-done }()
	rec := &kgo.Record{Topic: topic, Key: []byte("user-1"), Value: []byte(`{"type":"track","event":"Secret"}`)}
	if err := keys.SealRecords(ctx, []*kgo.Record{rec}, shred.RecordKey); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(rec.Value, []byte("Secret")) || shred.KeyOf(rec) == nil {
		t.Fatalf("the record is not sealed: %q", rec.Value)
	}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	line := func(args ...string) map[string]any {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := runTail(ctx, append([]string{topic, "-from-beginning", "-n", "1"}, args...), &out, &errOut); err != nil {
			t.Fatalf("tail: %v (%s)", err, errOut.String())
		}
		var m map[string]any
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			t.Fatalf("not JSON: %s", out.String())
		}
		return m
	}
	if m := line(); m["sealed"] != "opened" || m["value"].(map[string]any)["event"] != "Secret" {
		t.Errorf("sealed record: %v, want it opened", m)
	}
	if m := line("-sealed"); m["sealed"] != nil || strings.Contains(m["value"].(string), "Secret") {
		t.Errorf("-sealed: %v, want the value as stored", m)
	}
	if n, err := keys.Shred(ctx, "user-1"); err != nil || n != 1 {
		t.Fatalf("Shred: %d keys, %v", n, err)
	}
	if m := line(); m["sealed"] != "shredded" || m["value"] != nil {
		t.Errorf("after the shred: %v, want a null value, sealed shredded", m)
	}
}
