package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// TestConfigCommands: validate needs no broker and names the problem with its line; diff says
// what apply would change and writes nothing; apply applies, and a diff after it is empty.
func TestConfigCommands(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "my.yaml")
	if err := os.WriteFile(good, []byte("sources: [{id: web, writeKey: wk}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("sources:\n  - id: Web!\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KAFKA_BROKERS", "127.0.0.1:1") // validate must not need it
	var out bytes.Buffer
	if err := configCommand([]string{"validate", good}, &out); err != nil || !strings.Contains(out.String(), "valid: 1 sources") {
		t.Fatalf("validate: %v %s", err, out.String())
	}
	if err := configCommand([]string{"validate", bad}, &out); err == nil || !strings.Contains(err.Error(), bad+":2:") {
		t.Fatalf("validate of a bad file: %v", err)
	}

	e := servicetest.New(t, servicetest.Options{}) // a broker with every topic, no config
	t.Setenv("KAFKA_BROKERS", strings.Join(e.Kafka.Brokers, ","))
	for _, step := range []struct{ verb, want string }{
		{"diff", "create source/web\n" + good + ": 1 changes to apply"},
		{"diff", "create source/web"},
		{"apply", "create source/web\n" + good + ": 1 changes applied"},
		{"diff", good + ": no changes"},
	} {
		out.Reset()
		if err := configCommand([]string{step.verb, good}, &out); err != nil || !strings.Contains(out.String(), step.want) {
			t.Fatalf("%s: %v\n%s\nwant %q", step.verb, err, out.String(), step.want)
		}
	}
}

// TestReencryptCommand: `reencrypt --dry-run` lists the destinations still in clear and writes
// nothing; `reencrypt` rewrites them (a file's and the console's alike) with the first key,
// after which both say there is nothing to do; without the key it fails, naming the variable.
func TestReencryptCommand(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "my.yaml")
	if err := os.WriteFile(file, []byte("sources: [{id: web, writeKey: wk}]\ndestinations:\n  - {id: hooks, type: webhooks, sources: [web], settings: {webhooks: [{url: \"https://h.example.com/?token=tok-1\"}], sharedSecret: s3cret}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := servicetest.New(t, servicetest.Options{})
	t.Setenv("KAFKA_BROKERS", strings.Join(e.Kafka.Brokers, ","))
	var out bytes.Buffer
	if err := configCommand([]string{"apply", file}, &out); err != nil {
		t.Fatal(err)
	}
	if err := configCommand([]string{"reencrypt"}, &out); err == nil || !strings.Contains(err.Error(), "CONFIG_ENCRYPTION_KEY") {
		t.Fatalf("reencrypt without a key: %v", err)
	}
	t.Setenv("CONFIG_ENCRYPTION_KEY", "k1:"+strings.Repeat("A", 43)+"=")
	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"reencrypt", "--dry-run"}, "update destination/hooks: secrets encrypted with key k1\n1 objects to re-encrypt (tributary-init reencrypt)"},
		{[]string{"reencrypt"}, "update destination/hooks: secrets encrypted with key k1\n1 objects re-encrypted with key k1"},
		{[]string{"reencrypt", "--dry-run"}, "nothing to re-encrypt: every secret is encrypted with key k1"},
		{[]string{"diff", file}, file + ": no changes"},
	} {
		out.Reset()
		if err := configCommand(step.args, &out); err != nil || !strings.Contains(out.String(), step.want) {
			t.Fatalf("%v: %v\n%s\nwant %q", step.args, err, out.String(), step.want)
		}
	}
}
