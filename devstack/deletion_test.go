package devstack_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// The values planted in the deleted user's events: an email, a phone number and two card
// numbers, each distinctive enough that finding one anywhere is a leak.
var plantedValues = []string{"gone-7f3a9c@example.com", "+1-555-0100-7781", "4111111111111111", "5500005555555559"}

// TestDeletionLeavesNothingReadable follows a deleted user through the whole product
// (docs/security.md#what-a-deletion-leaves): the user's tracks, identify and page carry an
// email, a phone number and card numbers; the endpoint fails, so they wait in the retry tier;
// then a SUPPRESS_WITH_DELETE regulation is filed and the endpoint recovers. Within 60 s of
// the request the regulation is FINISHED, the destination received nothing of the user after
// its delete notice, and the planted values are found nowhere: in no record of any topic read
// raw, no answer of the console's API or page of its UI, not in the profile API, not in the
// logs — and not after the whole product restarts on the same data either. Another user's
// events are delivered throughout.
func TestDeletionLeavesNothingReadable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	var failing atomic.Bool
	failing.Store(true)
	rc := servicetest.NewReceiver(t, func(_ int, r *http.Request, w http.ResponseWriter) {
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	logs := &servicetest.Buffer{}
	dir := t.TempDir()
	cs := startConsoleStackLogged(t, dir, nil, logs)
	key := cs.createSource(t, "web")
	cs.createDestination(t, "hooks", "deletion-secret", []string{"web"}, rc.URL+"/segment")

	const gone, kept = "gone-user", "kept-user"
	cs.mustSend(t, key, "/v1/identify", `{"userId":"`+gone+`","messageId":"gone-identify","traits":{"email":"`+plantedValues[0]+`","phone":"`+plantedValues[1]+`"}}`)
	cs.mustSend(t, key, "/v1/track", `{"userId":"`+gone+`","messageId":"gone-order-1","event":"Order Completed","properties":{"card":"`+plantedValues[2]+`","total":120}}`)
	cs.mustSend(t, key, "/v1/track", `{"userId":"`+gone+`","messageId":"gone-order-2","event":"Order Completed","properties":{"card":"`+plantedValues[3]+`","email":"`+plantedValues[0]+`"}}`)
	cs.mustSend(t, key, "/v1/page", `{"userId":"`+gone+`","messageId":"gone-page","name":"Checkout","properties":{"phone":"`+plantedValues[1]+`"}}`)
	cs.mustSend(t, key, "/v1/track", `{"userId":"`+kept+`","messageId":"kept-order-1","event":"Order Completed","properties":{"card":"kept-card-1"}}`)

	// The test can see the values before the deletion: the console shows them (so a search
	// that finds nothing later is not a search that cannot find).
	ui := signedInUI(t, cs)
	servicetest.Eventually(t, 20*time.Second, "the planted values in the console's recent events and attempt log", func() bool {
		return len(rc.Requests()) >= 5 && strings.Contains(string(cs.call(t, http.MethodGet, "/v1/sources/web/events/recent", "").Body), plantedValues[2])
	})

	var created struct {
		Data struct {
			RegulateID string `json:"regulateId"`
		} `json:"data"`
	}
	filed := time.Now()
	cs.must(t, http.StatusOK, &created, http.MethodPost, "/v1/regulations", `{"regulationType":"SUPPRESS_WITH_DELETE","subjectType":"USER_ID","subjectIds":["`+gone+`"]}`)
	id := created.Data.RegulateID
	failing.Store(false)
	var reg struct {
		Data regulationView `json:"data"`
	}
	servicetest.Eventually(t, 60*time.Second, "the regulation FINISHED within 60 s", func() bool {
		reg.Data = regulationView{}
		cs.must(t, http.StatusOK, &reg, http.MethodGet, "/v1/regulations/"+id, "")
		return reg.Data.OverallStatus == "FINISHED"
	})
	t.Logf("regulation FINISHED %v after it was filed", time.Since(filed).Round(time.Millisecond))
	// The other user's track is delivered; a track of the suppressed user sent now is not.
	cs.mustSend(t, key, "/v1/track", `{"userId":"`+gone+`","messageId":"gone-after","event":"Order Completed","properties":{"card":"`+plantedValues[2]+`"}}`)
	cs.mustSend(t, key, "/v1/track", `{"userId":"`+kept+`","messageId":"kept-order-2","event":"Order Completed","properties":{"card":"kept-card-2"}}`)
	servicetest.Eventually(t, 30*time.Second, "kept-user's tracks delivered after the recovery", func() bool {
		return delivered(rc, "kept-order-1") && delivered(rc, "kept-order-2")
	})
	time.Sleep(3 * time.Second) // the 1 s retry tier comes round again: nothing of the user may come with it

	// Nothing of the user reached the destination after its delete notice.
	notice := -1
	for i, r := range rc.Requests() {
		if bytes.Contains(r.Body, []byte(`"type":"delete"`)) && bytes.Contains(r.Body, []byte(gone)) {
			notice = i
		}
	}
	if notice < 0 {
		t.Fatal("no delete notice reached the destination")
	}
	for _, r := range rc.Requests()[notice+1:] {
		if bytes.Contains(r.Body, []byte(gone)) || containsPlanted(r.Body) != "" {
			t.Errorf("after the delete notice the destination received %s", r.Body)
		}
	}

	search := func(when string, cs *consoleStack, ui *http.Client) {
		t.Helper()
		for _, leak := range searchTopics(t, cs.st.Brokers()) {
			t.Errorf("%s: %s", when, leak)
		}
		for _, leak := range searchConsole(t, cs, ui, gone) {
			t.Errorf("%s: %s", when, leak)
		}
		if v := containsPlanted([]byte(logs.String())); v != "" {
			t.Errorf("%s: the logs hold %q", when, v)
		}
	}
	search("after the deletion", cs, ui)
	cs.stop()
	again := startConsoleStackLogged(t, dir, nil, logs)
	time.Sleep(3 * time.Second) // the views read their topics back
	search("after a restart", again, signedInUI(t, again))
	if again.call(t, http.MethodGet, "/v1/sources/web/events/recent", "").Status != http.StatusOK {
		t.Error("the console's recent events after the restart")
	}
}

// delivered reports whether the receiver got a 2xx-answered request for messageID (its
// X-Message-Id header) — any request, as the receiver answers 200 once recovered.
func delivered(rc *servicetest.Receiver, messageID string) bool {
	for _, r := range rc.Requests() {
		if r.Header.Get("X-Message-Id") == messageID {
			return true
		}
	}
	return false
}

// containsPlanted returns the first planted value b holds ("" for none).
func containsPlanted(b []byte) string {
	for _, v := range plantedValues {
		if bytes.Contains(b, []byte(v)) {
			return v
		}
	}
	return ""
}

// searchTopics reads every topic of the broker raw, from the start to its end now (a plain
// consumer: no key, no decryption), and returns each record that holds a planted value in its
// key, value or headers.
func searchTopics(t *testing.T, brokers []string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[int32]kgo.Offset{}
	topics.EachPartition(func(p kadm.PartitionDetail) {
		if want[p.Topic] == nil {
			want[p.Topic] = map[int32]kgo.Offset{}
		}
		want[p.Topic][p.Partition] = kgo.NewOffset().AtStart()
	})
	rd, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(want),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	var leaks []string
	read := 0
	for idle := 0; idle < 3; { // until three fetches in a row bring nothing: every log read to its end
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := rd.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			t.Fatalf("reading every topic raw: %v (%d records read)", ctx.Err(), read)
		}
		if fs.NumRecords() == 0 {
			idle++
			continue
		}
		idle = 0
		fs.EachRecord(func(r *kgo.Record) {
			read++
			where := fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset)
			if v := containsPlanted(r.Key); v != "" {
				leaks = append(leaks, where+": key holds "+v)
			}
			if v := containsPlanted(r.Value); v != "" {
				leaks = append(leaks, where+": value holds "+v)
			}
			for _, h := range r.Headers {
				if v := containsPlanted(h.Value); v != "" {
					leaks = append(leaks, where+": header "+h.Key+" holds "+v)
				}
			}
		})
	}
	t.Logf("read %d records of %d topics raw", read, len(topics))
	return leaks
}

// searchConsole asks every console surface that shows messages, attempts, dead letters or
// profiles (API and UI pages) and returns those whose answer holds a planted value.
func searchConsole(t *testing.T, cs *consoleStack, ui *http.Client, user string) []string {
	t.Helper()
	var leaks []string
	api := []string{
		"/v1/sources/web/events/recent",
		"/v1/destinations/hooks/attempts",
		"/v1/destinations/hooks/dlq",
		"/v1/profiles/" + user,
		"/v1/regulations",
	}
	for _, m := range []string{"gone-identify", "gone-order-1", "gone-order-2", "gone-page", "gone-after"} {
		api = append(api, "/v1/messages/"+m+"/attempts")
	}
	for _, p := range api {
		if v := containsPlanted(cs.call(t, http.MethodGet, p, "").Body); v != "" {
			leaks = append(leaks, "console API "+p+" holds "+v)
		}
	}
	pages := []string{"/", "/sources", "/sources/web", "/destinations", "/destinations/hooks", "/deletions", "/audiences/profile?userId=" + url.QueryEscape(user)}
	for i := range 20 { // the attempt pages by sequence number, whatever the log still holds
		pages = append(pages, fmt.Sprintf("/destinations/hooks/attempts/%d", i))
	}
	for _, p := range pages {
		resp, err := ui.Get(cs.api + p)
		if err != nil {
			t.Fatalf("GET %s: %v", p, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if v := containsPlanted(b); v != "" {
			leaks = append(leaks, "console page "+p+" holds "+v)
		}
	}
	return leaks
}

// signedInUI is an HTTP client signed in to the console's UI with the token.
func signedInUI(t *testing.T, cs *consoleStack) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	ui := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := ui.PostForm(cs.api+"/signin", url.Values{"token": {consoleTestToken}, "next": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return ui
}
