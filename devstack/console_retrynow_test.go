package devstack_test

import (
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// TestConsoleRetryNow (docs/console.md#pending-retries, docs/delivery.md#retry-now) on the whole
// stack: three messages fail and wait in the 10 s tier; the console lists them with their next
// attempt and last error; the endpoint is back, "retry now" delivers each within 2 s of the POST,
// the list empties, and when the tier records come due nothing is sent again.
func TestConsoleRetryNow(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	var mu sync.Mutex
	up := false
	got := map[string][]time.Time{}
	rc := servicetest.NewReceiver(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		mu.Lock()
		defer mu.Unlock()
		id := r.Header.Get("X-Message-Id")
		got[id] = append(got[id], time.Now())
		if !up {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	count := func(id string) int {
		mu.Lock()
		defer mu.Unlock()
		return len(got[id])
	}
	cs := startConsoleStack(t, "", map[string]string{"RETRY_SCHEDULE": "10s"})
	key := cs.createSource(t, "web")
	cs.createDestination(t, "hooks", "retry-now-secret", []string{"web"}, rc.URL+"/segment")
	ids := []string{"rn-1", "rn-2", "rn-3"}
	cs.mustSend(t, key, "/v1/batch", `{"batch":[`+
		`{"type":"track","userId":"u1","event":"A","messageId":"rn-1"},`+
		`{"type":"track","userId":"u2","event":"B","messageId":"rn-2"},`+
		`{"type":"track","userId":"u3","event":"C","messageId":"rn-3"}]}`)

	type pending struct {
		MessageID     string `json:"messageId"`
		NextAttemptAt string `json:"nextAttemptAt"`
		LastError     string `json:"lastError"`
		LastStatus    int    `json:"lastStatus"`
	}
	list := func() []pending {
		var out struct {
			Data []pending `json:"data"`
		}
		cs.must(t, http.StatusOK, &out, http.MethodGet, "/v1/destinations/hooks/pending", "")
		return out.Data
	}
	var waiting []pending
	servicetest.Eventually(t, 8*time.Second, "the 3 messages waiting in the tier", func() bool { waiting = list(); return len(waiting) == 3 })
	for _, p := range waiting {
		if !slices.Contains(ids, p.MessageID) || p.NextAttemptAt == "" || p.LastStatus != 503 || p.LastError == "" {
			t.Errorf("waiting %+v: want its next attempt and last error (503)", p)
		}
	}

	mu.Lock()
	up = true
	mu.Unlock()
	start := time.Now()
	var res struct {
		Data struct {
			Sent int `json:"sent"`
		} `json:"data"`
	}
	cs.must(t, http.StatusAccepted, &res, http.MethodPost, "/v1/destinations/hooks/retry", "")
	if res.Data.Sent != 3 {
		t.Fatalf("retry now sent %d, want 3", res.Data.Sent)
	}
	servicetest.Eventually(t, 2*time.Second, "every waiting message delivered by the retry-now", func() bool {
		for _, id := range ids {
			if count(id) < 2 {
				return false
			}
		}
		return true
	})
	t.Logf("every waiting message delivered %v after the POST", time.Since(start))
	servicetest.Eventually(t, 5*time.Second, "the pending list empty", func() bool { return len(list()) == 0 })

	time.Sleep(time.Until(start.Add(12 * time.Second))) // the tier records came due
	for _, id := range ids {
		if n := count(id); n != 2 {
			t.Errorf("%s reached the endpoint %d times, want 2: the first attempt and the retry-now", id, n)
		}
	}
}
