package platform_test

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/kafkatest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestConsoleUsersAndTokensInTheStore: a config file's console.users are applied as
// console-user records of the file's origin (emails in lower case) and found whatever the case
// of the email; an API token is found by its secret's hash until its tombstone; make run's apply
// (PruneEveryFile) deletes a user the file no longer lists but never a token.
func TestConsoleUsersAndTokensInTheStore(t *testing.T) {
	s := platform.KafkaSettings{Brokers: kafkatest.Embedded(t), ReplicationFactor: -1, Partitions: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, adm := newClient(t, s)
	topic := kafkatest.UniqueTopic(t, "config")
	if err := platform.EnsureTopics(ctx, adm, -1, []platform.TopicSpec{{Name: topic, Partitions: 1, Compact: true}}); err != nil {
		t.Fatal(err)
	}
	store, _ := runStore(t, s, topic, zerolog.Nop())
	dir := t.TempDir()
	file := writeConfig(t, dir, "team.yaml", "console:\n  users:\n    - {email: Ana@Example.com, role: admin, pii: true}\n    - {email: bob@example.com, role: viewer}\n")
	if got, err := platform.ApplyConfigFile(ctx, s, topic, file, platform.ApplyOptions{}, zerolog.Nop()); err != nil ||
		changeList(got) != "create console-user/ana@example.com; create console-user/bob@example.com" {
		t.Fatalf("apply: %s (%v)", changeList(got), err)
	}
	tok := schemas.APIToken{ID: "t1", Name: "ci", Role: "editor", SecretHash: schemas.HashAPITokenSecret("trb_secret"), Origin: schemas.OriginConsole}
	rec, err := tok.Record()
	if err != nil {
		t.Fatal(err)
	}
	if err := platform.ProduceConfigRecords(ctx, cl, topic, rec); err != nil {
		t.Fatal(err)
	}
	snap := waitVisible(t, store, "the token", func(sn *platform.Snapshot) bool { _, ok := sn.APITokenByID("t1"); return ok })
	if u, ok := snap.ConsoleUserByEmail("ANA@example.com"); !ok || u.Role != "admin" || !u.PII || u.Origin != "file:team.yaml" || u.Email != "ana@example.com" {
		t.Errorf("ana = %+v, %v", u, ok)
	}
	if got, ok := snap.APITokenByHash(schemas.HashAPITokenSecret("trb_secret")); !ok || got.Name != "ci" {
		t.Errorf("by hash = %+v, %v", got, ok)
	}
	if _, ok := snap.APITokenByHash(schemas.HashAPITokenSecret("trb_other")); ok {
		t.Error("another secret found the token")
	}

	file = writeConfig(t, dir, "team.yaml", "console:\n  users:\n    - {email: ana@example.com, role: admin, pii: true}\n")
	if got, err := platform.ApplyConfigFile(ctx, s, topic, file, platform.ApplyOptions{PruneEveryFile: true}, zerolog.Nop()); err != nil ||
		changeList(got) != "delete console-user/bob@example.com" {
		t.Fatalf("apply as the whole config: %s (%v)", changeList(got), err)
	}
	snap = waitVisible(t, store, "bob deleted", func(sn *platform.Snapshot) bool { _, ok := sn.ConsoleUserByEmail("bob@example.com"); return !ok })
	if _, ok := snap.APITokenByID("t1"); !ok {
		t.Error("make run's apply deleted an API token")
	}
	if err := platform.DeleteConfigObject(ctx, cl, topic, schemas.ConfigKindAPIToken, "t1"); err != nil {
		t.Fatal(err)
	}
	snap = waitVisible(t, store, "the token revoked", func(sn *platform.Snapshot) bool { _, ok := sn.APITokenByID("t1"); return !ok })
	if _, ok := snap.APITokenByHash(schemas.HashAPITokenSecret("trb_secret")); ok {
		t.Error("a revoked token is found by its hash")
	}
}
