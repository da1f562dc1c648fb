package devstack_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// The body of the test vectors in schemas/signature_test.go and docs/receivers.md.
var receiverVectorBody = []byte(`{"version":1,"type":"track","userId":"u1","event":"Signed Up","timestamp":"2026-01-02T03:04:05.678Z","messageId":"m-1"}`)

const receiverVectorXSignature = "ed0ffccbf3f1bad4a5fa3343d636f8c216ffc219" // X-Signature of it under "s3cret"

// TestReceiverExamples runs each receiver of examples/receivers (Go, Node, Python) as a real
// process and posts to it what the deliverer sends, signed with the schemas functions: the
// good signature is accepted (200), a tampered body or a wrong secret is refused (401), a
// repeated message id is acknowledged as a duplicate, and in Standard Webhooks mode a stale
// timestamp is refused and a rotation (signatures under the new and the old secret) accepted
// by a receiver that still holds the old one.
func TestReceiverExamples(t *testing.T) {
	root := receiverRepoRoot()
	examples := []struct {
		name    string
		command func(t *testing.T) []string
	}{
		{"go", func(t *testing.T) []string {
			// The equivalent of `go run examples/receivers/go/main.go`, built first so that the
			// process we kill is the receiver itself (go run would leave its child running).
			bin := filepath.Join(t.TempDir(), "receiver")
			build := exec.Command(receiverTool(t, "go"), "build", "-o", bin, "examples/receivers/go/main.go")
			build.Dir = root
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("building examples/receivers/go/main.go: %v\n%s", err, out)
			}
			return []string{bin}
		}},
		{"node", func(t *testing.T) []string {
			return []string{receiverTool(t, "node"), filepath.Join(root, "examples/receivers/node/server.mjs")}
		}},
		{"python", func(t *testing.T) []string {
			return []string{receiverTool(t, "python3"), filepath.Join(root, "examples/receivers/python/server.py")}
		}},
	}
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			command := ex.command(t)
			t.Run("X-Signature", func(t *testing.T) {
				base := startExampleReceiver(t, command, "SHARED_SECRET=s3cret")
				if got := schemas.XSignature("s3cret", receiverVectorBody); got != receiverVectorXSignature {
					t.Fatalf("the documented vector changed: %s", got)
				}
				tampered := bytes.Replace(receiverVectorBody, []byte(`"Signed Up"`), []byte(`"Signed  Up"`), 1)
				for _, c := range []struct {
					name   string
					body   []byte
					header map[string]string
					status int
					answer string
				}{
					{"good signature", receiverVectorBody, map[string]string{"X-Signature": receiverVectorXSignature, "X-Message-Id": "m-1"}, 200, "ok"},
					{"same message again", receiverVectorBody, map[string]string{"X-Signature": receiverVectorXSignature, "X-Message-Id": "m-1"}, 200, "duplicate"},
					{"tampered body", tampered, map[string]string{"X-Signature": receiverVectorXSignature, "X-Message-Id": "m-2"}, 401, "bad X-Signature"},
					{"wrong secret", receiverVectorBody, map[string]string{"X-Signature": schemas.XSignature("not-s3cret", receiverVectorBody), "X-Message-Id": "m-3"}, 401, "bad X-Signature"},
					{"no signature", receiverVectorBody, map[string]string{"X-Message-Id": "m-4"}, 401, "missing X-Signature"},
				} {
					postToExampleReceiver(t, base, c.name, c.body, c.header, c.status, c.answer)
				}
			})
			t.Run("Standard Webhooks", func(t *testing.T) {
				// The receiver still holds the old secret (in whsec_ form: base64 of the key);
				// Tributary has moved to a new one and signs with both until the rotation ends.
				const oldSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
				const newSecret = "whsec_bmV3LXNlY3JldC1ieXRlcy1mb3ItdGhlLXRlc3Q="
				base := startExampleReceiver(t, command, "SHARED_SECRET="+oldSecret, "STANDARD_WEBHOOKS=true")
				now := time.Now().Unix()
				signed := func(id string, ts int64, body []byte, secrets ...string) map[string]string {
					return map[string]string{
						"X-Message-Id":      id,
						"X-Signature":       schemas.XSignature(secrets[0], body),
						"webhook-id":        id,
						"webhook-timestamp": strconv.FormatInt(ts, 10),
						"webhook-signature": schemas.StandardWebhooksHeader(id, ts, body, secrets...),
					}
				}
				tampered := bytes.Replace(receiverVectorBody, []byte(`"u1"`), []byte(`"u2"`), 1)
				forged := signed("m-5", now, receiverVectorBody, newSecret, oldSecret)
				forged["webhook-id"] = "m-6" // a replay under a fresh id: the id is signed
				for _, c := range []struct {
					name   string
					body   []byte
					header map[string]string
					status int
					answer string
				}{
					{"rotation: new and old secret", receiverVectorBody, signed("m-1", now, receiverVectorBody, newSecret, oldSecret), 200, "ok"},
					{"same message again", receiverVectorBody, signed("m-1", now, receiverVectorBody, newSecret, oldSecret), 200, "duplicate"},
					{"old secret alone", receiverVectorBody, signed("m-2", now, receiverVectorBody, oldSecret), 200, "ok"},
					{"tampered body", tampered, signed("m-3", now, receiverVectorBody, newSecret, oldSecret), 401, "bad webhook-signature"},
					{"wrong secret", receiverVectorBody, signed("m-4", now, receiverVectorBody, newSecret, "whsec_d3Jvbmc="), 401, "bad webhook-signature"},
					{"id changed", receiverVectorBody, forged, 401, "bad webhook-signature"},
					{"timestamp 10 minutes old", receiverVectorBody, signed("m-7", now-600, receiverVectorBody, newSecret, oldSecret), 401, "webhook-timestamp too far from now"},
					{"X-Signature only", receiverVectorBody, map[string]string{"X-Signature": schemas.XSignature(oldSecret, receiverVectorBody), "X-Message-Id": "m-8"}, 401, "missing or malformed"},
				} {
					postToExampleReceiver(t, base, c.name, c.body, c.header, c.status, c.answer)
				}
			})
		})
	}
}

// TestReceiverDocsMatchTheCode checks that docs/receivers.md shows the real signing vectors
// and the real delivered bodies (schemas/testdata/webhook, the router's golden files).
func TestReceiverDocsMatchTheCode(t *testing.T) {
	root := receiverRepoRoot()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "receivers.md"))
	if err != nil {
		t.Fatal(err)
	}
	body := receiverVectorBody
	for _, want := range []string{
		"\n" + string(body) + "\n",
		fmt.Sprintf("these exact %d bytes", len(body)),
		schemas.XSignature("s3cret", body),
		schemas.StandardWebhooksHeader("m-1", 1767323045, body, "new", "old"),
		schemas.StandardWebhooksSignature("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`)),
	} {
		if !bytes.Contains(doc, []byte(want)) {
			t.Errorf("docs/receivers.md does not show %q", want)
		}
	}
	goldens, _ := filepath.Glob(filepath.Join(root, "schemas", "testdata", "webhook", "*.json"))
	if len(goldens) != 7 {
		t.Fatalf("%d golden bodies, want one per type (7)", len(goldens))
	}
	for _, g := range goldens {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(doc, []byte("```json\n"+string(b)+"```")) {
			t.Errorf("docs/receivers.md does not show %s as it is", filepath.Base(g))
		}
	}
}

// receiverRepoRoot is the repository root (this file is in devstack/).
func receiverRepoRoot() string {
	_, thisFile, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(thisFile))
}

// receiverTool returns the path of an interpreter or tool, and skips the test loudly when it
// is not installed.
func receiverTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("SKIPPING the %s example receiver: %s is not on PATH; install it to run this test", t.Name(), name)
	}
	return path
}

// startExampleReceiver starts command on a free loopback port with env and returns its base
// URL once it accepts connections. The process is killed at the end of the test; its output
// is shown if the test fails.
func startExampleReceiver(t *testing.T, command []string, env ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	cmd := exec.Command(command[0], command[1:]...)
	// Defaults first; env and PORT override them (the last value of a key wins).
	cmd.Env = append(os.Environ(), "HOST=127.0.0.1", "STANDARD_WEBHOOKS=false", "PREVIOUS_SHARED_SECRET=")
	cmd.Env = append(cmd.Env, env...)
	cmd.Env = append(cmd.Env, "PORT="+strconv.Itoa(port))
	out := &servicetest.Buffer{} // the receiver's stdout and stderr
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %v: %v", command, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("output of %v:\n%s", command, out)
		}
	})

	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return "http://" + addr
		}
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			t.Fatalf("%v exited before listening: %v\n%s", command, err, out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v not listening on %s within 20s\n%s", command, addr, out)
		}
	}
}

// postToExampleReceiver POSTs body with the deliverer's headers plus header, and checks the
// status and that the answer contains answer.
func postToExampleReceiver(t *testing.T, base, name string, body []byte, header map[string]string, status int, answer string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/webhook", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", "Tributary/1.0")
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: 5 * time.Second} // the deliverer's deadline
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("%s: reading the answer: %v", name, err)
	}
	if resp.StatusCode != status || !strings.Contains(string(got), answer) {
		t.Errorf("%s: %d %q, want %d containing %q", name, resp.StatusCode, strings.TrimSpace(string(got)), status, answer)
	}
}
