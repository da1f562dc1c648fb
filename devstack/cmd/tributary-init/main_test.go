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
