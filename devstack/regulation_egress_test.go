package devstack_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestRegulationStopsRetries is the retry-tier finding on the whole stack: a user's messages
// waiting in a retry tier when a SUPPRESS_WITH_DELETE regulation is filed through the console
// are never delivered after it — the destination gets the delete notice and another user's
// retried message only — and a DLQ replay afterwards sends nothing of the user
// (docs/delivery.md#deleted-and-suppressed-users).
func TestRegulationStopsRetries(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	var failing atomic.Bool
	failing.Store(true)
	rc := servicetest.NewReceiver(t, func(_ int, _ *http.Request, w http.ResponseWriter) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	cs := startConsoleStack(t, "", map[string]string{"RETRY_SCHEDULE": "4s"})
	key := cs.createSource(t, "web")
	cs.createDestination(t, "hooks", "egress-secret", []string{"web"}, rc.URL+"/segment")
	for _, m := range []string{"gone-1", "gone-2", "gone-3"} {
		cs.mustSend(t, key, "/v1/track", `{"userId":"u-gone","messageId":"`+m+`","event":"Order Completed","properties":{"email":"gone@example.com","phone":"+15551234567"}}`)
	}
	cs.mustSend(t, key, "/v1/track", `{"userId":"u-kept","messageId":"kept-1","event":"Order Completed"}`)
	rc.WaitRequests(t, 4, 10*time.Second) // every first attempt failed: all four wait in the 4 s tier
	failing.Store(false)

	var created struct {
		Data struct {
			RegulateID string `json:"regulateId"`
		} `json:"data"`
	}
	cs.must(t, http.StatusOK, &created, http.MethodPost, "/v1/regulations", `{"regulationType":"SUPPRESS_WITH_DELETE","subjectType":"USER_ID","subjectIds":["u-gone"]}`)
	id := created.Data.RegulateID
	servicetest.Eventually(t, 10*time.Second, "the regulation FINISHED", func() bool {
		var reg struct {
			Data regulationView `json:"data"`
		}
		cs.must(t, http.StatusOK, &reg, http.MethodGet, "/v1/regulations/"+id, "")
		return reg.Data.OverallStatus == "FINISHED"
	})
	time.Sleep(7 * time.Second) // past the tier's due time, with room
	got := messageIDs(rc.Requests())
	after := got[4:]
	slices.Sort(after)
	if !slices.Equal(after, []string{"delete-" + id + "-web", "kept-1"}) {
		t.Fatalf("requests %v: after the four failed first attempts, want the delete notice and kept-1 only", got)
	}
	// The three drops are logged on webhooks.attempts, class deleted (the console's delivery
	// log forgets them with the user: docs/console.md#what-the-console-forgets).
	servicetest.Eventually(t, 10*time.Second, "three drops of u-gone on webhooks.attempts, class deleted", func() bool {
		n := 0
		for _, r := range readAll(t, cs.st, `^`+regexp.QuoteMeta(schemas.TopicAttempts)+`$`) {
			if bytes.Contains(r.Value, []byte(`"errorClass":"deleted"`)) {
				n++
			}
		}
		return n == 3
	})
	if n := len(cs.attempts(t, "hooks", "&status=deleted")); n != 0 {
		t.Errorf("the console's delivery log shows %d attempts of the deleted user", n)
	}

	// The user's records are not in the DLQ either; a replay of everything sends nothing of it.
	var replay struct {
		Data map[string]any `json:"data"`
	}
	cs.must(t, http.StatusOK, &replay, http.MethodPost, "/v1/destinations/hooks/dlq/replay", `{}`)
	if replay.Data["replayed"] != 0.0 {
		b, _ := json.Marshal(replay.Data)
		t.Errorf("replay after the deletion: %s, want nothing replayed", b)
	}
}
