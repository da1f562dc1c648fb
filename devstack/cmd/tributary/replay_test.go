package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestReplayCLI: a dry run by default (dryRun true, the flags as the body's members, a duration
// -from turned into a time), -start starts and polls the progress until the replay is done,
// a console's error is the command's, with its message.
func TestReplayCLI(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]any
	polls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-123" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/replays":
			var b map[string]any
			_ = json.NewDecoder(r.Body).Decode(&b)
			bodies = append(bodies, b)
			if b["destinationId"] == "nope" {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"code":"invalid","message":"destinationId: no destination \"nope\"","field":"destinationId"}`))
				return
			}
			if b["dryRun"] == true {
				_, _ = w.Write([]byte(`{"data":{"matched":42}}`))
				return
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"data":{"replayId":"rp_1","matched":42}}`))
		case r.Method == http.MethodGet && r.URL.Path == "/v1/replays/rp_1":
			polls++
			state := "running"
			if polls == 2 {
				state = "done"
			}
			_, _ = w.Write([]byte(`{"data":{"id":"rp_1","matched":42,"sent":` + map[bool]string{true: "42", false: "10"}[polls == 2] + `,"delivered":3,"failed":0,"state":"` + state + `"}}`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	t.Setenv("CONSOLE_URL", srv.URL)
	t.Setenv("CONSOLE_TOKEN", "tok-123")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var out bytes.Buffer
	if err := runReplay(ctx, []string{"-destination", "hooks", "-from", "2h", "-type", "track", "-user", "u1", "-max-per-second", "50"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "42 messages match (a dry run") {
		t.Errorf("dry run printed %q", out.String())
	}
	b := bodies[0]
	from, _ := time.Parse(time.RFC3339Nano, b["from"].(string))
	if b["dryRun"] != true || b["destinationId"] != "hooks" || b["maxPerSecond"] != float64(50) || time.Since(from) < 2*time.Hour-time.Minute || time.Since(from) > 2*time.Hour+time.Minute {
		t.Errorf("dry run body %v", b)
	}
	if f := b["filter"].(map[string]any); f["type"] != "track" || f["userId"] != "u1" || len(f) != 2 {
		t.Errorf("filter %v", f)
	}

	out.Reset()
	if err := runReplay(ctx, []string{"-destination", "hooks", "-from", "2026-11-27T10:00:00Z", "-start", "-poll", "10ms"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if bodies[1]["dryRun"] != false || bodies[1]["from"] != "2026-11-27T10:00:00Z" || polls != 2 ||
		!strings.Contains(out.String(), "replay rp_1 started: 42 messages") || !strings.Contains(out.String(), "done: matched 42, sent 42, delivered 3, failed 0") {
		t.Errorf("start: body %v, %d polls, printed %q", bodies[1], polls, out.String())
	}

	err := runReplay(ctx, []string{"-destination", "nope", "-from", "1h"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), `400: destinationId: no destination "nope"`) {
		t.Errorf("error %v", err)
	}
	if err := runReplay(ctx, []string{"-destination", "hooks", "-from", "yesterday"}, &out, &out); err == nil || !strings.Contains(err.Error(), "-from") {
		t.Errorf("bad -from: %v", err)
	}
}
