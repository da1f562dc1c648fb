package platform_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestApplyConfigFileAudited: applying a config file records each object it creates, updates
// and deletes on tributary.audit, by tributary-init, before → after with the secrets hashed
// (docs/console.md#audit-trail); applying it again unchanged records nothing.
func TestApplyConfigFileAudited(t *testing.T) {
	s := platform.KafkaSettings{Brokers: kafkatest.Embedded(t), ReplicationFactor: -1, Partitions: 3}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, adm := newClient(t, s)
	topic := kafkatest.UniqueTopic(t, "config")
	if err := platform.EnsureTopics(ctx, adm, -1, []platform.TopicSpec{{Name: topic, Partitions: 1, Compact: true}, platform.AuditTopic(0)}); err != nil {
		t.Fatal(err)
	}
	// Ids of this test's own: tributary.audit is shared by the package's tests.
	id := strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(topic, "test-")), ".", "-")
	id = id[max(0, len(id)-40):]
	const secret = "audited-shared-secret-0123456789"
	file := func(name, secret string) string {
		return "sources:\n  - {id: src-" + id + ", name: Web, writeKeyHash: " + schemas.HashWriteKey("wk_audited_0123456789") + "}\n" +
			"destinations:\n  - {id: dst-" + id + ", name: " + name + ", type: webhooks, sources: [src-" + id + "], settings: {webhooks: [{url: \"https://a.example.com/\"}], sharedSecret: " + secret + "}}\n"
	}
	dir := t.TempDir()
	apply := func(body string) {
		t.Helper()
		if _, err := platform.ApplyConfigFile(ctx, s, topic, writeConfig(t, dir, "audited.yaml", body), platform.ApplyOptions{}, zerolog.Nop()); err != nil {
			t.Fatal(err)
		}
	}
	apply(file("Hooks", secret))
	apply(file("Hooks", secret)) // unchanged: nothing written, nothing recorded
	apply(file("Hooks 2", secret))
	apply("sources:\n  - {id: src-" + id + ", name: Web, writeKeyHash: " + schemas.HashWriteKey("wk_audited_0123456789") + "}\n")

	var got []string
	var raw []byte
	var update schemas.AuditRecord
	r, err := platform.NewTopicReader(platform.TopicReaderConfig{Kafka: s, Topic: schemas.TopicAudit, Logger: zerolog.Nop(), Apply: func(rec *kgo.Record) {
		a, err := schemas.DecodeAuditRecord(rec.Value)
		if err != nil {
			t.Errorf("an audit record does not decode: %v", err)
			return
		}
		if !strings.HasSuffix(a.Object.ID, id) {
			return
		}
		raw = append(raw, rec.Value...)
		got = append(got, a.Action+" "+a.Object.ID+" "+a.Actor.Kind)
		if a.Action == "destination.update" {
			update = a
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"source.create src-" + id + " tributary-init", "destination.create dst-" + id + " tributary-init",
		"destination.update dst-" + id + " tributary-init", "destination.delete dst-" + id + " tributary-init"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("audit records:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(string(update.Before), `"name":"Hooks"`) || !strings.Contains(string(update.After), `"name":"Hooks 2"`) ||
		!strings.Contains(string(update.After), schemas.HashSecret(secret)) {
		t.Errorf("the update: before %s, after %s", update.Before, update.After)
	}
	if bytes.Contains(raw, []byte(secret)) {
		t.Error("the audit topic holds the shared secret")
	}
}
