package platform_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

func writeConfig(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func changeList(cs []platform.ConfigChange) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.String())
	}
	return strings.Join(out, "; ")
}

// TestDeclarativeConfig: a config file is the source of truth for the objects it manages.
// Applying it again changes nothing; an object removed from it is deleted; an object of
// another origin (another file, the console) is never touched, and a file that lists one is
// refused before anything is written; make run's apply (PruneEveryFile) removes other files'
// objects but keeps the console's; a diff (DryRun) writes nothing; a running config store logs
// each change it sees.
func TestDeclarativeConfig(t *testing.T) {
	s := platform.KafkaSettings{Brokers: kafkatest.Embedded(t), ReplicationFactor: -1, Partitions: 3}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, adm := newClient(t, s)
	topic := kafkatest.UniqueTopic(t, "config")
	if err := platform.EnsureTopics(ctx, adm, -1, []platform.TopicSpec{{Name: topic, Partitions: 1, Compact: true}}); err != nil {
		t.Fatal(err)
	}
	var logs servicetest.Buffer
	store, _ := runStore(t, s, topic, zerolog.New(&logs))
	dir := t.TempDir()
	dest := func(id, url string) string {
		return fmt.Sprintf("  - {id: %s, type: webhooks, sources: [web], settings: {webhooks: [{url: %q}], sharedSecret: s3cret}}\n", id, url)
	}
	appDest := func(id, url string) string { return strings.Replace(dest(id, url), "[web]", "[app]", 1) }
	a := writeConfig(t, dir, "a.yaml", "sources: [{id: web, writeKey: wk_web}]\ndestinations:\n"+dest("d1", "https://one.example.com")+dest("d2", "https://two.example.com"))
	apply := func(path string, opts platform.ApplyOptions) ([]platform.ConfigChange, error) {
		return platform.ApplyConfigFile(ctx, s, topic, path, opts, zerolog.Nop())
	}
	if got, err := apply(a, platform.ApplyOptions{}); err != nil || changeList(got) != "create source/web; create destination/d1; create destination/d2" {
		t.Fatalf("first apply: %s (%v)", changeList(got), err)
	}
	if got, err := apply(a, platform.ApplyOptions{}); err != nil || len(got) != 0 {
		t.Fatalf("the same file again: %s (%v), want no change", changeList(got), err)
	}
	waitVisible(t, store, "d2", func(sn *platform.Snapshot) bool { _, ok := sn.DestinationByID("d2"); return ok })

	// A console object, and another file's.
	consoleDest := schemas.Destination{ID: "from-console", Type: schemas.DestinationTypeWebhooks, Sources: []string{"web"},
		Settings: schemas.DestinationSettings{Webhooks: []schemas.Webhook{{URL: "https://console.example.com"}}}, Origin: schemas.OriginConsole}
	rec, err := consoleDest.Record()
	if err != nil {
		t.Fatal(err)
	}
	if err := platform.ProduceConfigRecords(ctx, cl, topic, rec); err != nil {
		t.Fatal(err)
	}
	b := writeConfig(t, dir, "b.yaml", "sources: [{id: app, writeKey: wk_app}]\ndestinations:\n"+appDest("d3", "https://three.example.com"))
	if got, err := apply(b, platform.ApplyOptions{}); err != nil || changeList(got) != "create source/app; create destination/d3" {
		t.Fatalf("apply b: %s (%v)", changeList(got), err)
	}

	// a without d2 and with d1's URL changed: a diff first, then the apply.
	a = writeConfig(t, dir, "a.yaml", "sources: [{id: web, writeKey: wk_web}]\ndestinations:\n"+dest("d1", "https://uno.example.com"))
	want := "update destination/d1: settings.webhooks[0].url; delete destination/d2"
	if got, err := apply(a, platform.ApplyOptions{DryRun: true}); err != nil || changeList(got) != want {
		t.Fatalf("diff: %s (%v), want %s", changeList(got), err, want)
	}
	if _, ok := store.Snapshot().DestinationByID("d2"); !ok {
		t.Fatal("a diff deleted d2")
	}
	if got, err := apply(a, platform.ApplyOptions{}); err != nil || changeList(got) != want {
		t.Fatalf("apply: %s (%v), want %s", changeList(got), err, want)
	}
	snap := waitVisible(t, store, "d2 deleted", func(sn *platform.Snapshot) bool { _, ok := sn.DestinationByID("d2"); return !ok })
	for _, id := range []string{"d3", "from-console"} {
		if _, ok := snap.DestinationByID(id); !ok {
			t.Errorf("applying a.yaml deleted %s, which it does not manage", id)
		}
	}
	if d, _ := snap.DestinationByID("d1"); d == nil || d.Settings.Webhooks[0].URL != "https://uno.example.com" || d.Origin != "file:a.yaml" {
		t.Errorf("d1 = %+v", d)
	}
	waitVisible(t, store, "log", func(*platform.Snapshot) bool {
		return strings.Contains(logs.String(), "destination d1 updated: settings.webhooks[0].url changed") &&
			strings.Contains(logs.String(), "destination d2 deleted")
	})
	if strings.Contains(logs.String(), "s3cret") || strings.Contains(logs.String(), "uno.example.com") {
		t.Errorf("the store's change log shows values:\n%s", logs.String())
	}

	// A file that lists another origin's object is refused, and writes nothing.
	c := writeConfig(t, dir, "c.yaml", "sources: [{id: web, writeKey: wk_web}]\ndestinations:\n"+dest("d4", "https://four.example.com")+dest("from-console", "https://evil.example.com"))
	if got, err := apply(c, platform.ApplyOptions{}); err == nil || !strings.Contains(err.Error(), "destination/from-console is managed by console") {
		t.Fatalf("apply c: %s (%v), want a refusal", changeList(got), err)
	}
	time.Sleep(300 * time.Millisecond)
	if _, ok := store.Snapshot().DestinationByID("d4"); ok {
		t.Error("a refused file wrote d4")
	}

	// make run's apply: every other file's objects go, the console's stay.
	if got, err := apply(a, platform.ApplyOptions{PruneEveryFile: true}); err != nil || changeList(got) != "delete destination/d3; delete source/app" {
		t.Fatalf("apply a as the whole config: %s (%v)", changeList(got), err)
	}
	snap = waitVisible(t, store, "d3 deleted", func(sn *platform.Snapshot) bool { _, ok := sn.DestinationByID("d3"); return !ok })
	if _, ok := snap.DestinationByID("from-console"); !ok {
		t.Error("make run's apply deleted the console's destination")
	}
}

// TestReencryptConfig: with CONFIG_ENCRYPTION_KEY turned on, ReencryptConfig rewrites every
// destination whose secrets are in clear or under another key than the first — a file's and
// the console's alike, each keeping its origin — and a running config store says which objects
// still need it (Snapshot.NeedsSealing); a second run, and a dry run after it, change nothing.
func TestReencryptConfig(t *testing.T) {
	s := platform.KafkaSettings{Brokers: kafkatest.Embedded(t), ReplicationFactor: -1, Partitions: 3}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, adm := newClient(t, s)
	topic := kafkatest.UniqueTopic(t, "config")
	if err := platform.EnsureTopics(ctx, adm, -1, []platform.TopicSpec{{Name: topic, Partitions: 1, Compact: true}}); err != nil {
		t.Fatal(err)
	}
	// In clear: a file's destination (with a URL that carries a token) and the console's.
	file := writeConfig(t, t.TempDir(), "secrets.yaml", secretsConfig)
	if _, err := platform.ApplyConfigFile(ctx, s, topic, file, platform.ApplyOptions{}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	console := &schemas.Destination{ID: "console-hooks", Type: schemas.DestinationTypeWebhooks, Sources: []string{"web"}, Origin: schemas.OriginConsole,
		Settings: schemas.DestinationSettings{Webhooks: []schemas.Webhook{{URL: "https://u:console-pw@four.example.com/?token=console-tok"}}, SharedSecret: "console-s3cret"}}
	rec, err := console.Record()
	if err != nil {
		t.Fatal(err)
	}
	if err := platform.ProduceConfigRecords(ctx, cl, topic, rec); err != nil {
		t.Fatal(err)
	}
	withKey := s
	withKey.ConfigEncryptionKey = "k1:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{42}, 32))
	store, _ := runStore(t, withKey, topic, zerolog.Nop())
	snap := store.Snapshot()
	if !snap.NeedsSealing(schemas.ConfigKindDestination, "signed-hooks") || !snap.NeedsSealing(schemas.ConfigKindDestination, "console-hooks") ||
		snap.NeedsSealing(schemas.ConfigKindDestination, "plain-hooks") || snap.NeedsSealing(schemas.ConfigKindSource, "web") {
		t.Fatal("NeedsSealing: want the two destinations with secrets in clear, and nothing else")
	}

	changes, err := platform.ReencryptConfig(ctx, withKey, topic, true, zerolog.Nop())
	if got, want := changeList(changes), "update destination/console-hooks: secrets encrypted with key k1; update destination/signed-hooks: secrets encrypted with key k1"; err != nil || got != want {
		t.Fatalf("dry run: %s (%v), want %s", got, err, want)
	}
	changes, err = platform.ReencryptConfig(ctx, withKey, topic, false, zerolog.Nop())
	if got, want := changeList(changes), "update destination/console-hooks: secrets encrypted with key k1; update destination/signed-hooks: secrets encrypted with key k1"; err != nil || got != want {
		t.Fatalf("ReencryptConfig: %s (%v), want %s", got, err, want)
	}
	raw := rawConfig(t, ctx, s, topic)
	for k, v := range raw {
		for _, secret := range append(secretsInConfig, "console-pw", "console-tok", "console-s3cret") {
			if bytes.Contains(v, []byte(secret)) {
				t.Errorf("record %s holds %q in clear: %s", k, secret, v)
			}
		}
	}
	if _, err := store.WaitFor(ctx, func(sn *platform.Snapshot) bool {
		return !sn.NeedsSealing(schemas.ConfigKindDestination, "signed-hooks") && !sn.NeedsSealing(schemas.ConfigKindDestination, "console-hooks")
	}); err != nil {
		t.Fatal("the store still says the records need sealing")
	}
	snap = store.Snapshot()
	if d, _ := snap.DestinationByID("signed-hooks"); d.Origin != "file:secrets.yaml" || d.Settings.SharedSecret != "s3cret-now" {
		t.Errorf("the file's destination after re-encryption: %+v", d)
	}
	if d, _ := snap.DestinationByID("console-hooks"); d.Origin != schemas.OriginConsole || d.Settings.Webhooks[0].URL != "https://u:console-pw@four.example.com/?token=console-tok" {
		t.Errorf("the console's destination after re-encryption: %+v", d)
	}
	if changes, err := platform.ReencryptConfig(ctx, withKey, topic, false, zerolog.Nop()); err != nil || len(changes) != 0 {
		t.Errorf("again: %s (%v), want no change", changeList(changes), err)
	}
	if changes, err := platform.ApplyConfigFile(ctx, withKey, topic, file, platform.ApplyOptions{DryRun: true}, zerolog.Nop()); err != nil || len(changes) != 0 {
		t.Errorf("the file after re-encryption: %s (%v), want no change", changeList(changes), err)
	}
	if _, err := platform.ReencryptConfig(ctx, s, topic, false, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "CONFIG_ENCRYPTION_KEY") {
		t.Errorf("without a key: %v, want an error naming CONFIG_ENCRYPTION_KEY", err)
	}
}
