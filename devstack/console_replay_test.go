package devstack_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// TestConsoleReplay (docs/delivery.md#replay) on the whole stack: three messages are delivered;
// a replay of the track calls of the range re-delivers those two, signed, with their messageId
// unchanged and the header X-Tributary-Replay: <replayId>; its progress counts them delivered.
func TestConsoleReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	type hit struct{ id, replay string }
	var mu sync.Mutex
	var got []hit
	rc := servicetest.NewReceiver(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, hit{r.Header.Get("X-Message-Id"), r.Header.Get("X-Tributary-Replay")})
	})
	hits := func() []hit {
		mu.Lock()
		defer mu.Unlock()
		return append([]hit(nil), got...)
	}
	cs := startConsoleStack(t, "", nil)
	key := cs.createSource(t, "web")
	cs.createDestination(t, "hooks", "replay-secret", []string{"web"}, rc.URL+"/segment")
	from := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	cs.mustSend(t, key, "/v1/batch", `{"batch":[`+
		`{"type":"track","userId":"u1","event":"A","messageId":"rp-1"},`+
		`{"type":"identify","userId":"u1","messageId":"rp-2"},`+
		`{"type":"track","userId":"u2","event":"B","messageId":"rp-3"}]}`)
	servicetest.Eventually(t, 15*time.Second, "the 3 first deliveries", func() bool { return len(hits()) == 3 })

	var res struct {
		Data struct {
			ReplayID string `json:"replayId"`
			Matched  int    `json:"matched"`
		} `json:"data"`
	}
	body := `{"destinationId":"hooks","from":"` + from + `","filter":{"type":"track"},"maxPerSecond":10}`
	cs.must(t, http.StatusOK, &res, http.MethodPost, "/v1/replays", body[:len(body)-1]+`,"dryRun":true}`)
	if res.Data.Matched != 2 {
		t.Fatalf("dry run matched %d, want 2", res.Data.Matched)
	}
	cs.must(t, http.StatusCreated, &res, http.MethodPost, "/v1/replays", body)
	id := res.Data.ReplayID
	servicetest.Eventually(t, 15*time.Second, "the 2 replayed deliveries", func() bool { return len(hits()) == 5 })
	for _, h := range hits()[3:] {
		if (h.id != "rp-1" && h.id != "rp-3") || h.replay != id {
			t.Errorf("replayed delivery %+v, want rp-1 or rp-3 with X-Tributary-Replay %s", h, id)
		}
	}
	for _, h := range hits()[:3] {
		if h.replay != "" {
			t.Errorf("first delivery %+v has X-Tributary-Replay", h)
		}
	}
	servicetest.Eventually(t, 15*time.Second, "the progress", func() string {
		var p struct {
			Data struct {
				Sent, Delivered, Failed int
				State                   string
			} `json:"data"`
		}
		cs.must(t, http.StatusOK, &p, http.MethodGet, "/v1/replays/"+id, "")
		if d := p.Data; d.Sent == 2 && d.Delivered == 2 && d.Failed == 0 && d.State == "done" {
			return ""
		}
		return fmt.Sprint(p.Data)
	})
}
