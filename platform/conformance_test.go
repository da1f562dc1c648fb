package platform_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestKafkaConformance is the platform's integration suite: it runs once against the embedded
// broker and once against Apache Kafka.
func TestKafkaConformance(t *testing.T) {
	kafkatest.Conformance(t, func(t *testing.T, brokers []string) {
		settings := platform.KafkaSettings{Brokers: brokers, ReplicationFactor: -1, Partitions: 3}
		t.Run("topic bootstrap", func(t *testing.T) { testTopicBootstrap(t, settings) })
		t.Run("partitions only grow", func(t *testing.T) { testPartitionsOnlyGrow(t, settings) })
		t.Run("config store", func(t *testing.T) { testConfigStore(t, settings) })
		t.Run("config store on an empty topic", func(t *testing.T) { testConfigStoreEmpty(t, settings) })
		t.Run("config secrets at rest", func(t *testing.T) { testConfigSecretsAtRest(t, settings) })
		t.Run("config writers fence each other", func(t *testing.T) { testConfigWriterFences(t, settings) })
		t.Run("a killed config write is never applied", func(t *testing.T) { testConfigWriteKilled(t, settings) })
	})
}

func newClient(t *testing.T, s platform.KafkaSettings) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := platform.NewKafkaClient(s, zerolog.Nop())
	if err != nil {
		t.Fatalf("NewKafkaClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func testTopicBootstrap(t *testing.T, s platform.KafkaSettings) {
	ctx := testCtx(t, 60*time.Second)
	_, adm := newClient(t, s)

	// The default topics, renamed so that runs on the shared Apache broker do not collide.
	prefix := kafkatest.UniqueTopic(t, "boot")
	specs := platform.DefaultTopics(s.Partitions, []time.Duration{10 * time.Second, time.Minute, time.Minute})
	byName := map[string]platform.TopicSpec{}
	for i := range specs {
		byName[specs[i].Name] = specs[i]
		specs[i].Name = prefix + "." + specs[i].Name
	}
	for i := range 2 { // the second run must find everything in place and change nothing
		if err := platform.EnsureTopics(ctx, adm, s.ReplicationFactor, specs); err != nil {
			t.Fatalf("EnsureTopics, run %d: %v", i+1, err)
		}
	}

	names := make([]string, len(specs))
	for i, sp := range specs {
		names[i] = sp.Name
	}
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		t.Fatalf("ListTopics: %v", err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		t.Fatalf("DescribeTopicConfigs: %v", err)
	}
	tests := []struct {
		topic      string
		partitions int
		policy     string
		retention  string // "" when not checked (compacted topics)
	}{
		{schemas.TopicConfig, 1, "compact", ""},
		{schemas.TopicSessions, 1, "compact,delete", "86400000"},
		{schemas.TopicKeys, 1, "compact", ""},
		{schemas.TopicAudiencesState, 3, "compact", ""},
		{schemas.TopicAudiencesRepartition, 3, "delete", "604800000"},
		{schemas.TopicSuppressions, 3, "compact", ""},
		{schemas.TopicEvents, 3, "delete", "604800000"},
		{schemas.TopicInbound, 3, "delete", "604800000"},
		{schemas.TopicRejected, 3, "delete", "604800000"},
		{schemas.TopicDeliveries, 3, "delete", "604800000"},
		{schemas.TopicDedupe, 3, "delete", "3600000"},
		{schemas.TopicAttempts, 3, "delete", "604800000"},
		{schemas.TopicDeletions, 3, "delete", "2592000000"},
		{schemas.TopicDeletionsStatus, 3, "delete", "2592000000"},
		{schemas.TopicDLQ, 3, "delete", "2592000000"},
		{schemas.TopicDLQReplayed, 1, "delete", "2592000000"},
		{schemas.TopicRetriedNow, 1, "compact,delete", "604800000"},
		{schemas.TopicParked, 3, "delete", "2592000000"},
		{schemas.TopicParkedReplayed, 1, "delete", "2592000000"},
		{schemas.TopicNotices, 1, "delete", "2592000000"},
		{schemas.TopicAudit, 1, "delete", "34560000000"}, // 400 days
		{"webhooks.retry.10s", 3, "delete", "604800000"},
		{"webhooks.retry.1m", 3, "delete", "604800000"},
	}
	if len(tests) != len(specs) {
		t.Errorf("DefaultTopics returned %d topics, the table checks %d", len(specs), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.topic, func(t *testing.T) {
			if _, ok := byName[tt.topic]; !ok {
				t.Fatalf("DefaultTopics has no %s", tt.topic)
			}
			name := prefix + "." + tt.topic
			d, ok := details[name]
			if !ok || d.Err != nil {
				t.Fatalf("topic not listed: %v", d.Err)
			}
			if got := len(d.Partitions); got != tt.partitions {
				t.Errorf("partitions = %d, want %d", got, tt.partitions)
			}
			rc, err := configs.On(name, nil)
			if err != nil {
				t.Fatalf("configs: %v", err)
			}
			if got := configValue(rc, "cleanup.policy"); got != tt.policy {
				t.Errorf("cleanup.policy = %q, want %q", got, tt.policy)
			}
			if tt.retention != "" {
				if got := configValue(rc, "retention.ms"); got != tt.retention {
					t.Errorf("retention.ms = %q, want %q", got, tt.retention)
				}
			}
			if tt.topic == schemas.TopicAudiencesState { // docs/topics.md#audiencesstate
				for k, want := range map[string]string{"segment.ms": "3600000", "max.compaction.lag.ms": "3600000",
					"min.cleanable.dirty.ratio": "0.1", "delete.retention.ms": "3600000"} {
					if got := configValue(rc, k); got != want {
						t.Errorf("%s = %q, want %q", k, got, want)
					}
				}
			}
		})
	}
}

func configValue(rc kadm.ResourceConfig, key string) string {
	for _, c := range rc.Configs {
		if c.Key == key {
			return c.MaybeValue()
		}
	}
	return ""
}

func testPartitionsOnlyGrow(t *testing.T, s platform.KafkaSettings) {
	ctx := testCtx(t, 60*time.Second)
	_, adm := newClient(t, s)
	topic := kafkatest.UniqueTopic(t, "grow")
	for _, step := range []struct{ ask, want int32 }{{2, 2}, {4, 4}, {1, 4}} {
		spec := []platform.TopicSpec{{Name: topic, Partitions: step.ask, Retention: time.Hour}}
		if err := platform.EnsureTopics(ctx, adm, s.ReplicationFactor, spec); err != nil {
			t.Fatalf("EnsureTopics(%d partitions): %v", step.ask, err)
		}
		// Apache Kafka's metadata shows new partitions a moment after CreatePartitions answers:
		// read until they show (a shrink would never reach want: it stays at the old count).
		var got int32
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			details, err := adm.ListTopics(ctx, topic)
			if err != nil {
				t.Fatalf("ListTopics: %v", err)
			}
			if got = int32(len(details[topic].Partitions)); got == step.want || time.Now().After(deadline) {
				break
			}
		}
		if got != step.want {
			t.Errorf("after asking for %d partitions: %d, want %d", step.ask, got, step.want)
		}
	}
}

func runStore(t *testing.T, s platform.KafkaSettings, topic string, logger zerolog.Logger) (*platform.ConfigStore, func() error) {
	t.Helper()
	store, err := platform.NewConfigStore(s, topic, logger)
	if err != nil {
		t.Fatalf("NewConfigStore: %v", err)
	}
	if got := store.Snapshot(); got == nil || got.Version() != 0 || len(got.Sources()) != 0 {
		t.Fatalf("snapshot before Run = %+v, want empty version 0", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- store.Run(ctx) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		return <-done
	}
	t.Cleanup(func() { _ = stop() })
	select {
	case <-store.Ready():
	case err := <-done:
		stopped = true
		t.Fatalf("store stopped before ready: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("store not ready after 20s")
	}
	return store, stop
}

// waitVisible waits at most a second for cond to hold on the store's snapshot.
func waitVisible(t *testing.T, store *platform.ConfigStore, what string, cond func(*platform.Snapshot) bool) *platform.Snapshot {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	snap, err := store.WaitFor(ctx, cond)
	if err != nil {
		t.Fatalf("%s: not visible within 1s: %v", what, err)
	}
	t.Logf("%s: visible after %v", what, time.Since(start).Round(100*time.Microsecond))
	return snap
}

func destIDs(ds []*schemas.Destination) string {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	return strings.Join(ids, ",")
}

func testConfigStore(t *testing.T, s platform.KafkaSettings) {
	ctx := testCtx(t, 90*time.Second)
	cl, adm := newClient(t, s)
	topic := kafkatest.UniqueTopic(t, "config")
	spec := []platform.TopicSpec{{Name: topic, Partitions: 1, Compact: true}}
	if err := platform.EnsureTopics(ctx, adm, s.ReplicationFactor, spec); err != nil {
		t.Fatalf("EnsureTopics: %v", err)
	}
	if _, err := platform.ApplyConfigFile(ctx, s, topic, "testdata/config.yaml", platform.ApplyOptions{}, zerolog.Nop()); err != nil {
		t.Fatalf("ApplyConfigFile: %v", err)
	}

	var logs servicetest.Buffer
	store, stop := runStore(t, s, topic, zerolog.New(&logs))
	snap := store.Snapshot()
	if snap.Version() == 0 {
		t.Errorf("ready snapshot has version 0")
	}
	if !strings.Contains(logs.String(), `"records":5,"sources":2,"destinations":2,"audiences":1`) {
		t.Errorf("the store does not log how many records it read: %s", logs.String())
	}
	web, ok := snap.SourceByID("web")
	if !ok || web.Name != "Web site" {
		t.Fatalf("SourceByID(web) = %+v, %v", web, ok)
	}
	if web.WriteKey != "" {
		t.Errorf("source web carries its plaintext write key")
	}
	if got, ok := snap.SourceByKeyHash(schemas.HashWriteKey("wk_test_app")); !ok || got.ID != "app" {
		t.Errorf("SourceByKeyHash(app's key) = %+v, %v", got, ok)
	}
	if _, ok := snap.SourceByKeyHash(schemas.HashWriteKey("wk_unknown")); ok {
		t.Errorf("SourceByKeyHash found a source for an unknown key")
	}
	if got := destIDs(snap.DestinationsForSource("web")); got != "order-hooks,paused-hooks" {
		t.Errorf("DestinationsForSource(web) = %s", got)
	}
	if got := destIDs(snap.DestinationsForSource("app")); got != "order-hooks" {
		t.Errorf("DestinationsForSource(app) = %s", got)
	}
	if d, ok := snap.DestinationByID("paused-hooks"); !ok || d.IsEnabled() {
		t.Errorf("DestinationByID(paused-hooks) = %+v, %v; want a disabled destination", d, ok)
	}
	if got := snap.Audiences(); len(got) != 1 || got[0].ID != "power-users" {
		t.Errorf("Audiences() = %+v", got)
	}

	// An upsert: a file with only the web source changes it and leaves the rest alone.
	changes := snap.Stale()
	cfg := &schemas.Config{Sources: []schemas.Source{{ID: "web", Name: "Web site v2", WriteKey: "wk_test_web2"}}}
	if err := platform.ApplyConfig(ctx, cl, topic, cfg, nil); err != nil {
		t.Fatalf("ApplyConfig: %v", err)
	}
	snap = waitVisible(t, store, "change", func(s *platform.Snapshot) bool {
		src, ok := s.SourceByID("web")
		return ok && src.Name == "Web site v2"
	})
	select {
	case <-changes:
	default:
		t.Errorf("the old snapshot's Stale channel is open after a change")
	}
	if _, ok := snap.SourceByKeyHash(schemas.HashWriteKey("wk_test_web")); ok {
		t.Errorf("web's old write key still finds a source")
	}
	if got, ok := snap.SourceByKeyHash(schemas.HashWriteKey("wk_test_web2")); !ok || got.ID != "web" {
		t.Errorf("web's new write key: %+v, %v", got, ok)
	}
	if _, ok := snap.SourceByID("app"); !ok {
		t.Errorf("source app vanished after an upsert that did not mention it")
	}

	// A rotation: the previous key finds the source until it expires; every write of an object
	// raises its revision.
	rev := snap.Revision(schemas.ConfigKindSource, "web")
	if rev == 0 || snap.Revision(schemas.ConfigKindSource, "nope") != 0 {
		t.Errorf("Revision(web) = %d, Revision(nope) = %d", rev, snap.Revision(schemas.ConfigKindSource, "nope"))
	}
	rotated := &schemas.Config{Sources: []schemas.Source{
		{ID: "web", Name: "Web site v2", WriteKey: "wk_test_web3", PreviousWriteKeyHash: schemas.HashWriteKey("wk_test_web2"),
			PreviousWriteKeyExpiresAt: schemas.FormatTimestamp(time.Now().Add(time.Hour))},
		{ID: "app", Name: "App", WriteKey: "wk_test_app", PreviousWriteKeyHash: schemas.HashWriteKey("wk_test_app_old"),
			PreviousWriteKeyExpiresAt: schemas.FormatTimestamp(time.Now().Add(-time.Second))},
	}}
	if err := platform.ApplyConfig(ctx, cl, topic, rotated, nil); err != nil {
		t.Fatalf("ApplyConfig: %v", err)
	}
	snap = waitVisible(t, store, "rotation", func(s *platform.Snapshot) bool {
		_, ok := s.SourceByKeyHash(schemas.HashWriteKey("wk_test_web3"))
		return ok
	})
	if got, ok := snap.SourceByKeyHash(schemas.HashWriteKey("wk_test_web2")); !ok || got.ID != "web" {
		t.Errorf("the previous key during its overlap: %+v, %v", got, ok)
	}
	if _, ok := snap.SourceByKeyHash(schemas.HashWriteKey("wk_test_app_old")); ok {
		t.Errorf("an expired previous key still finds a source")
	}
	if got := snap.Revision(schemas.ConfigKindSource, "web"); got <= rev {
		t.Errorf("Revision(web) = %d after a write, was %d", got, rev)
	}

	// A tombstone deletes.
	if err := platform.DeleteConfigObject(ctx, cl, topic, schemas.ConfigKindDestination, "paused-hooks"); err != nil {
		t.Fatalf("DeleteConfigObject: %v", err)
	}
	snap = waitVisible(t, store, "tombstone", func(s *platform.Snapshot) bool {
		_, ok := s.DestinationByID("paused-hooks")
		return !ok
	})
	if got := destIDs(snap.DestinationsForSource("web")); got != "order-hooks" {
		t.Errorf("after the tombstone, DestinationsForSource(web) = %s", got)
	}

	// A record that does not decode is logged without its value and skipped.
	const secret = "TOPSECRET-do-not-log"
	bad := schemas.ConfigRecord{Key: "source/broken", Value: []byte(`{"id":"broken","writeKey":"` + secret + `"`)}
	if err := platform.ProduceConfigRecords(ctx, cl, topic, bad); err != nil {
		t.Fatalf("producing a bad record: %v", err)
	}
	cfg = &schemas.Config{Sources: []schemas.Source{{ID: "later", WriteKey: "wk_test_later"}}}
	if err := platform.ApplyConfig(ctx, cl, topic, cfg, nil); err != nil {
		t.Fatalf("ApplyConfig after a bad record: %v", err)
	}
	snap = waitVisible(t, store, "change after a bad record", func(s *platform.Snapshot) bool {
		_, ok := s.SourceByID("later")
		return ok
	})
	if _, ok := snap.SourceByID("broken"); ok {
		t.Errorf("the record that does not decode became a source")
	}
	if l := logs.String(); !strings.Contains(l, "source/broken") {
		t.Errorf("the bad record was not logged by key; logs:\n%s", l)
	} else if strings.Contains(l, secret) {
		t.Errorf("the logs hold the bad record's value")
	}

	if err := stop(); err != nil {
		t.Errorf("Run returned %v after cancellation, want nil", err)
	}

	// A new store re-materialises the same state from the topic.
	again, _ := runStore(t, s, topic, zerolog.Nop())
	snap2 := again.Snapshot()
	if got, want := summary(snap2), summary(snap); got != want {
		t.Errorf("restarted store:\n got %s\nwant %s", got, want)
	}
}

func summary(s *platform.Snapshot) string {
	var b strings.Builder
	for _, src := range s.Sources() {
		b.WriteString("source/" + src.ID + "=" + src.Name + "," + src.KeyHash()[:15] + " ")
	}
	for _, d := range s.Destinations() {
		b.WriteString("destination/" + d.ID + " ")
	}
	for _, a := range s.Audiences() {
		b.WriteString("audience/" + a.ID + " ")
	}
	return b.String()
}

func testConfigStoreEmpty(t *testing.T, s platform.KafkaSettings) {
	ctx := testCtx(t, 60*time.Second)
	_, adm := newClient(t, s)
	topic := kafkatest.UniqueTopic(t, "config")
	spec := []platform.TopicSpec{{Name: topic, Partitions: 1, Compact: true}}
	if err := platform.EnsureTopics(ctx, adm, s.ReplicationFactor, spec); err != nil {
		t.Fatalf("EnsureTopics: %v", err)
	}
	store, stop := runStore(t, s, topic, zerolog.Nop())
	if snap := store.Snapshot(); snap.Version() != 1 || len(snap.Sources())+len(snap.Destinations())+len(snap.Audiences()) != 0 {
		t.Errorf("snapshot of an empty topic: version %d, %s", snap.Version(), summary(snap))
	}
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v", err)
	}
}

// secretsConfig is a tenant config with every kind of secret: a shared secret, a previous
// one, and static header values on two webhooks (plus a destination without any).
const secretsConfig = `sources: [{id: web, writeKey: wk_test_web}]
destinations:
  - id: signed-hooks
    type: webhooks
    sources: [web]
    settings:
      webhooks:
        - {url: https://one.example.com/hook, headers: {Authorization: Bearer tok-one, X-Team: growth-team}}
        - {url: https://two.example.com/hook, headers: {Authorization: Bearer tok-two}}
      sharedSecret: s3cret-now
      previousSharedSecret: s3cret-before
  - {id: plain-hooks, type: webhooks, sources: [web], settings: {webhooks: [{url: https://three.example.com/hook}]}}
`

var secretsInConfig = []string{"s3cret-now", "s3cret-before", "Bearer tok-one", "Bearer tok-two", "growth-team"}

// rawConfig reads topic to its end and returns the last value of each key, as stored.
func rawConfig(t *testing.T, ctx context.Context, s platform.KafkaSettings, topic string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	r, err := platform.NewTopicReader(platform.TopicReaderConfig{Kafka: s, Topic: topic, Logger: zerolog.Nop(),
		Apply: func(r *kgo.Record) { out[string(r.Key)] = r.Value }})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(ctx); err != nil {
		t.Fatalf("reading %s: %v", topic, err)
	}
	return out
}

// testConfigSecretsAtRest applies a config with CONFIG_ENCRYPTION_KEY set: the topic's records
// hold no shared secret or header value in clear, a store with the key reads them back, and a
// store without it skips that destination with an error naming the key id (never the secret).
// Then a rotation: the records written with k1 are read with "k2,k1" but not with "k2" alone;
// applying the file again with "k2,k1" rewrites them with k2, after which "k2" alone reads
// them. Without a key, the records are exactly Config.Records' bytes, as before encryption.
func testConfigSecretsAtRest(t *testing.T, s platform.KafkaSettings) {
	ctx := testCtx(t, 60*time.Second)
	_, adm := newClient(t, s)
	topic := kafkatest.UniqueTopic(t, "config")
	if err := platform.EnsureTopics(ctx, adm, s.ReplicationFactor, []platform.TopicSpec{{Name: topic, Partitions: 1, Compact: true}}); err != nil {
		t.Fatalf("EnsureTopics: %v", err)
	}
	file := writeConfig(t, t.TempDir(), "secrets.yaml", secretsConfig)
	withKey := func(spec string) platform.KafkaSettings {
		w := s
		w.ConfigEncryptionKey = spec
		return w
	}
	key := func(id string, b byte) string {
		return id + ":" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32))
	}
	k1, k2 := key("k1", 42), key("k2", 43)
	apply := func(spec string) string {
		t.Helper()
		changes, err := platform.ApplyConfigFile(ctx, withKey(spec), topic, file, platform.ApplyOptions{}, zerolog.Nop())
		if err != nil {
			t.Fatalf("ApplyConfigFile: %v", err)
		}
		return changeList(changes)
	}
	decrypted := func(store *platform.ConfigStore) bool {
		d, ok := store.Snapshot().DestinationByID("signed-hooks")
		return ok && d.Settings.SharedSecret == "s3cret-now" && d.Settings.PreviousSharedSecret == "s3cret-before" &&
			d.Settings.Webhooks[0].Headers["Authorization"] == "Bearer tok-one" && d.Settings.Webhooks[0].Headers["X-Team"] == "growth-team" &&
			d.Settings.Webhooks[1].Headers["Authorization"] == "Bearer tok-two"
	}
	// skipped runs a store with spec and checks that it skips signed-hooks, logging want and
	// never a secret, and loads the destination without secrets.
	skipped := func(spec string, want ...string) {
		t.Helper()
		var logs servicetest.Buffer
		store, _ := runStore(t, withKey(spec), topic, zerolog.New(&logs))
		if _, ok := store.Snapshot().DestinationByID("signed-hooks"); ok {
			t.Errorf("with %q, signed-hooks was loaded", strings.Split(spec, ":")[0])
		}
		if _, ok := store.Snapshot().DestinationByID("plain-hooks"); !ok {
			t.Error("a destination without secrets was not loaded")
		}
		l := logs.String()
		for _, w := range want {
			if !strings.Contains(l, w) {
				t.Errorf("the store's log does not say %s: %s", w, l)
			}
		}
		for _, secret := range secretsInConfig {
			if strings.Contains(l, secret) {
				t.Errorf("the store's log shows a secret: %s", l)
			}
		}
	}

	if got, want := apply(k1), "create source/web; create destination/signed-hooks; create destination/plain-hooks"; got != want {
		t.Fatalf("apply with k1: %s, want %s", got, want)
	}
	raw := rawConfig(t, ctx, s, topic)
	if len(raw) != 3 {
		t.Fatalf("the topic holds %d objects, want 3", len(raw))
	}
	for k, v := range raw {
		for _, secret := range secretsInConfig {
			if bytes.Contains(v, []byte(secret)) {
				t.Errorf("record %s holds %q in clear: %s", k, secret, v)
			}
		}
	}
	if v := raw["destination/signed-hooks"]; bytes.Count(v, []byte(`"enc:v1:k1:`)) != 5 || !bytes.Contains(v, []byte(`"X-Team":"enc:v1:k1:`)) {
		t.Errorf("want 5 values encrypted with k1, header names in clear: %s", v)
	}
	if !decrypted(runStoreReady(t, withKey(k1), topic)) {
		t.Error("a store with k1 does not read the secrets back")
	}
	skipped("", `\"k1\"`, "CONFIG_ENCRYPTION_KEY is not set")

	// Rotation: k2 first, k1 still listed; a ring without k1 cannot read what k1 wrote.
	skipped(k2, `\"k1\"`, "does not list")
	if !decrypted(runStoreReady(t, withKey(k2+","+k1), topic)) {
		t.Error(`a store with "k2,k1" does not read what k1 wrote`)
	}
	if got, want := apply(k2+","+k1), "update destination/signed-hooks: secrets encrypted with key k2"; got != want {
		t.Fatalf("apply with k2,k1: %s, want %s", got, want)
	}
	if got := apply(k2 + "," + k1); got != "" {
		t.Errorf("applying again: %s, want no change", got)
	}
	if v := rawConfig(t, ctx, s, topic)["destination/signed-hooks"]; bytes.Count(v, []byte(`"enc:v1:k2:`)) != 5 {
		t.Errorf("after the rotation, want 5 values encrypted with k2: %s", v)
	}
	if !decrypted(runStoreReady(t, withKey(k2), topic)) {
		t.Error("after the rotation, a store with k2 alone does not read the secrets")
	}

	// Without a key: the records are Config.Records' bytes, secrets in clear as they always were.
	plainTopic := kafkatest.UniqueTopic(t, "config-plain")
	if err := platform.EnsureTopics(ctx, adm, s.ReplicationFactor, []platform.TopicSpec{{Name: plainTopic, Partitions: 1, Compact: true}}); err != nil {
		t.Fatalf("EnsureTopics: %v", err)
	}
	if _, err := platform.ApplyConfigFile(ctx, s, plainTopic, file, platform.ApplyOptions{}, zerolog.Nop()); err != nil {
		t.Fatalf("ApplyConfigFile without a key: %v", err)
	}
	cfg, err := schemas.LoadConfigFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Sources[0].Origin = "file:secrets.yaml"
	for i := range cfg.Destinations {
		cfg.Destinations[i].Origin = "file:secrets.yaml"
	}
	want, err := cfg.Records()
	if err != nil {
		t.Fatal(err)
	}
	raw = rawConfig(t, ctx, s, plainTopic)
	for _, rec := range want {
		if !bytes.Equal(raw[rec.Key], rec.Value) {
			t.Errorf("without a key, record %s is\n%s\nwant\n%s", rec.Key, raw[rec.Key], rec.Value)
		}
	}
}

func runStoreReady(t *testing.T, s platform.KafkaSettings, topic string) *platform.ConfigStore {
	t.Helper()
	store, _ := runStore(t, s, topic, zerolog.Nop())
	return store
}

// TestConfigStoreTimingVirtual pins the config store's timing on the bubble's fake clock
// (testing/synctest, kfake on its virtual network), where the machine's load cannot move it:
// a store started before its topic exists waits for it and is ready once it is created, and
// a change is visible within ConfigFetchMaxWait, the bound its documentation gives.
func TestConfigStoreTimingVirtual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		brokers, network := kafkatest.Virtual(t)
		s := platform.KafkaSettings{Brokers: brokers, ReplicationFactor: -1, Partitions: 1}
		dial := kgo.Dialer(network.DialContext)
		cl, err := platform.NewKafkaClient(s, zerolog.Nop(), dial)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		const topic = "config"

		store, err := platform.NewConfigStore(s, topic, zerolog.Nop(), dial)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- store.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}()

		time.Sleep(time.Minute)
		select {
		case <-store.Ready():
			t.Fatal("the store is ready without its topic")
		default:
		}
		spec := []platform.TopicSpec{{Name: topic, Partitions: 1, Compact: true}}
		if err := platform.EnsureTopics(t.Context(), kadm.NewClient(cl), -1, spec); err != nil {
			t.Fatalf("EnsureTopics: %v", err)
		}
		created := time.Now()
		select {
		case <-store.Ready():
		case <-time.After(time.Hour):
			t.Fatal("the store is not ready an hour after its topic was created")
		}
		t.Logf("ready %v after the topic was created", time.Since(created))

		// A store started before its topic existed may learn of the topic's partition a
		// metadata refresh later than Ready; the bound below is the steady state, so one
		// change is read first, without a bound.
		for i, id := range []string{"warm-up", "web", "app"} {
			cfg := &schemas.Config{Sources: []schemas.Source{{ID: id, WriteKey: "wk_" + id}}}
			if err := platform.ApplyConfig(t.Context(), cl, topic, cfg, nil); err != nil {
				t.Fatalf("ApplyConfig: %v", err)
			}
			applied := time.Now()
			wctx, wcancel := context.WithTimeout(t.Context(), time.Hour)
			_, err := store.WaitFor(wctx, func(s *platform.Snapshot) bool { _, ok := s.SourceByID(id); return ok })
			wcancel()
			if err != nil {
				t.Fatalf("source %s never visible: %v", id, err)
			}
			if took := time.Since(applied); i > 0 && took > platform.ConfigFetchMaxWait {
				t.Errorf("source %s visible %v after it was applied, over ConfigFetchMaxWait (%v)", id, took, platform.ConfigFetchMaxWait)
			}
		}
	})
}
