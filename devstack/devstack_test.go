package devstack_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/devstack"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// buildTributary builds the `make run` binary once per test.
func buildTributary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tributary")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/tributary")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("building cmd/tributary: %v", err)
	}
	return bin
}

// startTributary starts the binary with env and returns it with the embedded broker's address,
// read from its "embedded broker listening" log line; it waits for "config loaded".
func startTributary(t *testing.T, bin string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin)
	_, thisFile, _, _ := runtime.Caller(0)
	cmd.Dir = filepath.Dir(filepath.Dir(thisFile)) // the repository root, like make run
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan map[string]any)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	var broker string
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatal("tributary exited before it was ready")
			}
			if m["message"] == "embedded broker listening" {
				broker, _ = m["kafka"].(string)
			}
			if m["message"] == "config loaded; starting services" {
				go drain(lines)
				return cmd, broker
			}
		case <-deadline:
			t.Fatal("tributary not ready within 30s")
		}
	}
}

func TestMakeRunSurvivesRestartAndStopsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildTributary(t)
	dataDir := t.TempDir()
	env := []string{"DATA_DIR=" + dataDir, "EMBEDDED_KAFKA_PORT=0", "KAFKA_BROKERS=", "CONFIG_FILE=deploy/config/dev.yaml", "AUDIENCES_ADDR=127.0.0.1:0", "LOG_LEVEL=info"}

	cmd, broker := startTributary(t, bin, env...)
	if broker == "" {
		t.Fatal("no embedded broker address in the log")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	// One process per data folder: a second one on the same DATA_DIR refuses, naming the first.
	second := exec.Command(bin)
	second.Env = append(os.Environ(), env...)
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is in use by process "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("a second tributary on the same DATA_DIR: %v\n%s\nwant a refusal naming process %d", err, out, cmd.Process.Pid)
	}
	rec := &kgo.Record{Topic: schemas.TopicEvents, Key: []byte("user-1"), Value: []byte(`{"type":"track","event":"Survived"}`)}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("producing: %v", err)
	}
	cl.Close()

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("stopped %v after SIGTERM, want under 5s", took)
	}
	t.Logf("stopped %v after SIGTERM", time.Since(start))

	// Restart on the same DATA_DIR, without re-applying the config: both the event and the
	// config must still be there.
	env[3] = "CONFIG_FILE="
	_, broker = startTributary(t, bin, env...)
	cl, err = kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(schemas.TopicEvents, schemas.TopicConfig),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var sawEvent, sawSource bool
	for !(sawEvent && sawSource) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("after restart: event found %v, source config found %v", sawEvent, sawSource)
		}
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case r.Topic == schemas.TopicEvents && strings.Contains(string(r.Value), "Survived"):
				sawEvent = true
			case r.Topic == schemas.TopicConfig && string(r.Key) == "source/web":
				sawSource = true
			}
		})
	}
}

// TestMakeRunStopsOnSIGTERMToMake: the PID that `make run &` gives, sent SIGTERM, leaves no
// process: the binary stops cleanly (make exits 0, without "make: *** … Error"), its ports
// are free and its DATA_DIR lock released. Before, make and `go run` stopped and the binary
// they had built went on, holding the ports and the data folder.
func TestMakeRunStopsOnSIGTERMToMake(t *testing.T) {
	if testing.Short() {
		t.Skip("runs make run")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	_, thisFile, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(thisFile))
	dataDir := t.TempDir()
	ingest := servicetest.FreeAddr(t)
	cmd := exec.Command("make", "--no-print-directory", "-C", root, "run")
	cmd.Env = append(os.Environ(), "DATA_DIR="+dataDir, "EMBEDDED_KAFKA_PORT=0", "KAFKA_BROKERS=", "INGEST_ADDR="+ingest, "AUDIENCES_ADDR=127.0.0.1:0", "LOG_LEVEL=info")
	var output servicetest.Buffer // make's stdout and the log lines, written by two goroutines
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			_, _ = output.Write([]byte(sc.Text() + "\n"))
			if !once && strings.Contains(sc.Text(), "config loaded; starting services") {
				once = true
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(3 * time.Minute): // make run builds the binary first
		t.Fatalf("make run not ready:\n%s", output.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		// make itself ends by the signal it got (it re-raises it once its child has exited),
		// which is what SIGTERM means; any other failure is one.
		var exit *exec.ExitError
		if err != nil && !(errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGTERM) {
			t.Errorf("make run after SIGTERM: %v\n%s", err, output.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("make run still running 15 s after SIGTERM")
	}
	if strings.Contains(output.String(), "make: ***") {
		t.Errorf("make reported an error:\n%s", output.String())
	}
	// Nothing is left: the data folder's lock is free, and so is ingest's port.
	f, err := os.OpenFile(filepath.Join(dataDir, "tributary.lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Errorf("DATA_DIR still locked after make run stopped: %v", err)
	}
	l, err := net.Listen("tcp", ingest)
	if err != nil {
		t.Errorf("ingest's port still taken after make run stopped: %v", err)
	} else {
		l.Close()
	}
}

// drain reads the rest of the log so the child never blocks on a full pipe.
func drain(lines <-chan map[string]any) {
	for range lines {
	}
}

// TestBadConfigFileNamedOnce: a config file that does not validate stops the start with an
// error that names the file once, with the line (it used to say the path twice).
func TestBadConfigFileNamedOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "my.yaml")
	if err := os.WriteFile(path, []byte("sources:\n  - id: web\n    writeKey: wk\n    bogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := devstack.DefaultConfig()
	cfg.DataDir, cfg.ConfigFile, cfg.EmbeddedPort, cfg.Audiences.Addr = t.TempDir(), path, 0, "127.0.0.1:0"
	_, err := devstack.New(t.Context(), cfg, zerolog.Nop())
	if err == nil || strings.Count(err.Error(), path) != 1 || !strings.Contains(err.Error(), path+":4:") {
		t.Fatalf("error %v: want the file named once, with the line", err)
	}
}

// TestVersion: the version `make build` stamps (-X platform.Version) is what -version prints.
func TestVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "tributary")
	build := exec.Command("go", "build", "-ldflags", "-X github.com/tributary-cdp/tributary/platform.Version=v9.9.9-test", "-o", bin, "./cmd/tributary")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "-version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "tributary v9.9.9-test (go") {
		t.Fatalf("tributary -version: %q, %v", out, err)
	}
}
