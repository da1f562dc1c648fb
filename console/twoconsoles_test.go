package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/console"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// startConsoleWithStore starts a console on env with a config store of its own, as a second
// replica has: it reads tributary.config by itself.
func startConsoleWithStore(t *testing.T, env *servicetest.Env) *harness {
	t.Helper()
	store, err := platform.NewConfigStore(env.Kafka, schemas.TopicConfig, env.Logger, env.KafkaOpts...)
	if err != nil {
		t.Fatal(err)
	}
	env.Start("config store", store.Run)
	h := &harness{t: t, env: env, reg: prometheus.NewRegistry(), logs: &servicetest.Buffer{}, envLogs: &servicetest.Buffer{}}
	cfg := console.DefaultConfig()
	cfg.RegulationStores = []string{schemas.StoreRouter, schemas.StoreAudiences, schemas.StoreConsole}
	cfg.Addr = "127.0.0.1:0"
	cfg.Token = testToken
	cfg.ShutdownTimeout = 2 * time.Second
	logger := zerolog.New(h.logs).Level(zerolog.InfoLevel)
	svc, err := console.New(cfg, console.Deps{Deps: platform.Deps{Kafka: env.Kafka, KafkaOpts: env.KafkaOpts, Logger: logger, Registerer: h.reg, Gatherer: h.reg, Health: platform.NewHealth()}, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	h.svc = svc
	listen(t, env, svc)
	h.stop = env.Start("console", svc.Run)
	h.srv = serve(t, env, svc.Handler())
	env.WaitReady("http://"+svc.Addr()+"/readyz", 15*time.Second)
	return h
}

// conditionalWrite is one console's successful PATCH: the version it expected (If-Match) and
// the one it made.
type conditionalWrite struct {
	console  string
	from, to int64
	name     string
}

// TestTwoConsolesAndApplyRace: two consoles, each with its own config store, and a
// `tributary-init apply` of the file that manages the destination, all write the same
// destination at once. The consoles PATCH it with If-Match (the version they just read) and
// ?takeOver=true; apply writes the file's version while the file manages it, and must be
// refused once a console took it over. No write is lost: no two conditional writes succeed
// from the same version; each console write starts from the version the previous console write
// made (nothing, not even an apply, slipped in between); the destination ends as the last
// successful write left it. Every refused PATCH is 409 version_mismatch (or, fenced at every
// try, 503 unavailable, with nothing written).
func TestTwoConsolesAndApplyRace(t *testing.T) {
	env := servicetest.New(t, servicetest.Options{})
	applyBaseConfig(t, env)
	if _, err := env.Store.WaitFor(env.Ctx, func(s *platform.Snapshot) bool { _, ok := s.DestinationByID("file-hooks"); return ok }); err != nil {
		t.Fatal(err)
	}
	consoles := map[string]*harness{"A": startConsoleWithStore(t, env), "B": startConsoleWithStore(t, env)}
	writes := 25
	if testing.Short() {
		writes = 8
	}

	ctx, cancel := context.WithTimeout(env.Ctx, 3*time.Minute)
	defer cancel()
	var (
		mu        sync.Mutex
		successes []conditionalWrite
		conflicts = map[string]int{}
		contended int
		failures  []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	client := &http.Client{Timeout: 30 * time.Second}
	call := func(h *harness, method, path, body string, headers ...string) (int, []byte, error) {
		req, err := http.NewRequestWithContext(ctx, method, h.srv.URL+path, strings.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", servicetest.Bearer(testToken))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	version := func(body []byte) int64 {
		var a struct {
			Data struct {
				Version int64 `json:"version"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &a)
		return a.Data.Version
	}

	var consolesDone sync.WaitGroup
	applyWrote := make(chan struct{}) // the consoles start once apply has written (and keeps writing)
	for name, h := range consoles {
		consolesDone.Add(1)
		go func() {
			defer consolesDone.Done()
			select {
			case <-applyWrote:
			case <-ctx.Done():
				return
			}
			for i := range writes {
				status, body, err := call(h, http.MethodGet, "/v1/destinations/file-hooks", "")
				if err != nil || status != http.StatusOK {
					fail("console %s GET: %d %s %v", name, status, body, err)
					return
				}
				from := version(body)
				newName := fmt.Sprintf("%s-%d", name, i)
				status, body, err = call(h, http.MethodPatch, "/v1/destinations/file-hooks?takeOver=true", `{"name":"`+newName+`"}`,
					"If-Match", `"`+strconv.FormatInt(from, 10)+`"`)
				switch {
				case err != nil:
					fail("console %s PATCH: %v", name, err)
					return
				case status == http.StatusOK:
					mu.Lock()
					successes = append(successes, conditionalWrite{console: name, from: from, to: version(body), name: newName})
					mu.Unlock()
				case status == http.StatusConflict && bytes.Contains(body, []byte(`"version_mismatch"`)):
					mu.Lock()
					conflicts[name]++
					mu.Unlock()
				case status == http.StatusServiceUnavailable && bytes.Contains(body, []byte(`"unavailable"`)):
					// Fenced at every try (the writers kept contending): nothing written.
					mu.Lock()
					contended++
					mu.Unlock()
				default:
					fail("console %s PATCH from version %d: %d %s", name, from, status, body)
					return
				}
			}
		}()
	}

	// tributary-init apply, looping until the consoles are done: the file's destination with a
	// new name each time.
	applyDone := make(chan struct{})
	consolesFinished := make(chan struct{})
	applied, refused := 0, 0
	go func() {
		defer close(applyDone)
		dir := t.TempDir()
		for i := 0; ; i++ {
			select {
			case <-consolesFinished:
				return
			default:
			}
			file := filepath.Join(dir, "base.yaml")
			body := strings.Replace(baseConfig, "name: File hooks", fmt.Sprintf("name: apply-%d", i), 1)
			if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
				fail("writing the file: %v", err)
				return
			}
			_, err := platform.ApplyConfigFile(ctx, env.Kafka, schemas.TopicConfig, file, platform.ApplyOptions{}, zerolog.Nop())
			switch {
			case err == nil:
				if applied++; applied == 1 {
					close(applyWrote)
				}
			case strings.Contains(err.Error(), "destination/file-hooks is managed by console"):
				refused++
			case errors.Is(err, platform.ErrConfigWriteContended):
				mu.Lock()
				contended++
				mu.Unlock()
			default:
				fail("apply %d: %v", i, err)
				return
			}
		}
	}()
	consolesDone.Wait()
	close(consolesFinished)
	<-applyDone
	for _, f := range failures {
		t.Error(f)
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("console writes: %d succeeded, %v refused (version_mismatch); applies: %d written, %d refused; %d fenced at every try", len(successes), conflicts, applied, refused, contended)
	if len(successes) == 0 {
		t.Fatal("no console write succeeded")
	}

	// No two successes from one version; each from the version the previous one made.
	slices.SortFunc(successes, func(a, b conditionalWrite) int { return int(a.to - b.to) })
	from := map[int64]conditionalWrite{}
	for i, s := range successes {
		if prev, dup := from[s.from]; dup {
			t.Errorf("two writes succeeded from version %d: %+v and %+v (a lost update)", s.from, prev, s)
		}
		from[s.from] = s
		if i > 0 && s.from != successes[i-1].to {
			t.Errorf("write %+v succeeded from version %d, but the previous console write made version %d: another write slipped in between", s, s.from, successes[i-1].to)
		}
	}

	// Both consoles' stores end with the last write.
	last := successes[len(successes)-1]
	for name, h := range consoles {
		status, body, err := call(h, http.MethodGet, "/v1/destinations/file-hooks", "")
		if err != nil || status != http.StatusOK {
			t.Fatalf("console %s GET: %d %s %v", name, status, body, err)
		}
		var a struct {
			Data struct {
				Name    string `json:"name"`
				Origin  string `json:"origin"`
				Version int64  `json:"version"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatal(err)
		}
		if a.Data.Name != last.name || a.Data.Version != last.to || a.Data.Origin != schemas.OriginConsole {
			t.Errorf("console %s reads %+v, want the last write %+v (origin console)", name, a.Data, last)
		}
	}
}

// TestTwoConsolesUserRace: two consoles change one user's role with If-Match, each from the
// version it just read: no two writes succeed from the same version, each success starts from
// the version the one before it made, and every refusal is 409 version_mismatch (or 503 when
// fenced at every try).
func TestTwoConsolesUserRace(t *testing.T) {
	env := servicetest.New(t, servicetest.Options{})
	consoles := []*harness{startConsoleWithStore(t, env), startConsoleWithStore(t, env)}
	const email = "ada@example.com"
	expect(t, consoles[0].do(http.MethodPut, "/v1/users/"+email, `{"role":"viewer"}`), http.StatusCreated)
	writes := 15
	if testing.Short() {
		writes = 6
	}
	var (
		mu        sync.Mutex
		successes []conditionalWrite
		failures  []string
		wg        sync.WaitGroup
	)
	for i, h := range consoles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := string(rune('A' + i))
			for n := range writes {
				got := h.do(http.MethodGet, "/v1/users/"+email, nil)
				if got.Status != http.StatusOK {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("console %s GET: %d %s", name, got.Status, got.Body))
					mu.Unlock()
					return
				}
				from := got.Header.Get("ETag")
				role := []string{"viewer", "editor"}[n%2]
				put := h.do(http.MethodPut, "/v1/users/"+email, `{"role":"`+role+`"}`, "If-Match", from)
				mu.Lock()
				switch {
				case put.Status == http.StatusOK:
					f, _ := strconv.ParseInt(strings.Trim(from, `"`), 10, 64)
					to, _ := strconv.ParseInt(strings.Trim(put.Header.Get("ETag"), `"`), 10, 64)
					successes = append(successes, conditionalWrite{console: name, from: f, to: to, name: role})
				case put.Status == http.StatusConflict && bytes.Contains(put.Body, []byte(`"version_mismatch"`)),
					put.Status == http.StatusServiceUnavailable && bytes.Contains(put.Body, []byte(`"unavailable"`)):
				default:
					failures = append(failures, fmt.Sprintf("console %s PUT from %s: %d %s", name, from, put.Status, put.Body))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("unexpected answers:\n%s", strings.Join(failures, "\n"))
	}
	if len(successes) == 0 {
		t.Fatal("no conditional write succeeded")
	}
	slices.SortFunc(successes, func(a, b conditionalWrite) int { return int(a.from - b.from) })
	for i, w := range successes {
		if i > 0 && w.from == successes[i-1].from {
			t.Errorf("two writes succeeded from version %d: %+v and %+v (a lost update)", w.from, successes[i-1], w)
		}
		if i > 0 && w.from != successes[i-1].to {
			t.Errorf("a write succeeded from version %d, but the write before it made %d: %+v", w.from, successes[i-1].to, w)
		}
	}
}
