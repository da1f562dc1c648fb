package ingest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestSegmentAnalyticsNode runs Segment's @segment/analytics-node (testdata/node, pinned in its
// package-lock.json), unmodified, against ingest. The test installs it with `npm ci` when
// node_modules is missing; without node and npm it is skipped loudly (TEST_NODE_CLIENT=1 makes
// that a failure).
func TestSegmentAnalyticsNode(t *testing.T) {
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	servicetest.RequireRuntime(t, "TEST_NODE_CLIENT", "the @segment/analytics-node test", "node and npm", errors.Join(errNode, errNpm))
	dir, _ := filepath.Abs(filepath.Join("testdata", "node"))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@segment", "analytics-node")); err != nil {
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
	}
	h := newHarness(t)
	cmd := exec.Command(node, "send.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WRITE_KEY="+testKey, "INGEST_URL="+h.srv.URL)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("analytics-node: %v\n%s", err, out)
	}
	checkClientMessages(t, h, "@segment/analytics-node", map[string]string{
		"node-1": "identify", "node-2": "track", "node-3": "page", "node-4": "screen", "node-5": "group", "node-6": "alias",
	})
}

// checkClientMessages reads one record per entry of types (userId or anonymousId → call type)
// from tracking.events and checks what a Segment library sent arrived whole: its type, the
// source, an id and receivedAt, the library's name in context.library with a version, and
// context.ip from the peer.
func checkClientMessages(t *testing.T, h *harness, library string, types map[string]string) {
	t.Helper()
	byKey := map[string]map[string]any{}
	for _, r := range consume(t, h.brokers, schemas.TopicEvents, len(types)) {
		if header(r, schemas.HeaderSourceID) != "web" {
			t.Errorf("%s: source-id %q", r.Key, header(r, schemas.HeaderSourceID))
		}
		byKey[string(r.Key)] = decodeValue(t, r)
	}
	for key, typ := range types {
		m := byKey[key]
		if m == nil {
			t.Errorf("no record for %s (got %d records)", key, len(byKey))
			continue
		}
		if m["type"] != typ || m["messageId"] == nil || m["receivedAt"] == nil {
			t.Errorf("%s: %v", key, m)
		}
		ctx, _ := m["context"].(map[string]any)
		lib, _ := ctx["library"].(map[string]any)
		if lib["name"] != library || lib["version"] == nil || lib["version"] == "" || ctx["ip"] != "127.0.0.1" {
			t.Errorf("%s: context %v", key, ctx)
		}
	}
}
