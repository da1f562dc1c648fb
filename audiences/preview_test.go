package audiences_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tributary-cdp/tributary/audiences"
	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// TestPreview: POST /v1/audiences/preview counts the profiles a candidate rule matches now,
// with the evaluation of membership (event counts and windows, traits, computed traits,
// groups), asks for the token, and names the field of an invalid rule.
func TestPreview(t *testing.T) { synctest.Test(t, testPreview) }

func testPreview(t *testing.T) {
	h := newHarness(t, sources+vip+orders)
	svc, _, _ := h.run("aud-preview", func(c *audiences.Config) { c.Token = testToken })
	// 12 users: u00..u11; the even ones are pro; user i ordered i%4 times (revenue 10 each).
	const users = 12
	for i := range users {
		u := fmt.Sprintf("u%02d", i)
		plan := "free"
		if i%2 == 0 {
			plan = "pro"
		}
		h.send(fmt.Sprintf(`{"type":"identify","userId":%q,"traits":{"plan":%q}}`, u, plan))
		for range i % 4 {
			h.track(u, "Order Completed", `{"revenue":10}`)
		}
	}
	servicetest.Eventually(t, 20*time.Second, "profile u11 with its orders", func() string {
		var p audiences.ProfileView
		if code := h.Get(api(svc)+"/v1/profiles/u11", testToken, &p); code != http.StatusOK || string(p.ComputedTraits["orders_total"]) != "30" {
			return fmt.Sprintf("profile u11: %d %+v", code, p)
		}
		return ""
	})

	count := func(rule string, now string) audiences.PreviewView {
		t.Helper()
		body := `{"rule":` + rule
		if now != "" {
			body += `,"now":"` + now + `"`
		}
		var v audiences.PreviewView
		var e struct{ Code, Message string }
		code := h.Post(api(svc)+"/v1/audiences/preview", testToken, body+"}", &v)
		if code != http.StatusOK {
			h.Post(api(svc)+"/v1/audiences/preview", testToken, body+"}", &e)
			t.Fatalf("preview %s: %d %+v", rule, code, e)
		}
		if v.Profiles != users || v.Partitions != 3 || v.Total != 3 || v.Partial || v.At == "" {
			t.Errorf("preview %s: %+v", rule, v)
		}
		return v
	}
	for _, tt := range []struct {
		rule string
		want int
	}{
		{`{"event":"Order Completed","atLeast":2}`, 6},                                             // i%4 in {2,3}
		{`{"event":"Order Completed","atLeast":2,"within":"1h"}`, 6},                               // all recent
		{`{"event":"Order Completed","atMost":0}`, 3},                                              // i%4 == 0
		{`{"trait":"plan","equals":"pro"}`, 6},                                                     // even
		{`{"all":[{"trait":"plan","equals":"pro"},{"event":"Order Completed"}]}`, 3},               // 2, 6, 10
		{`{"not":{"trait":"plan","in":["pro","team"]}}`, 6},                                        // odd
		{`{"computedTrait":"orders","gte":30}`, 3},                                                 // 3, 7, 11
		{`{"any":[{"trait":"plan","equals":"team"},{"event":"Signed Up"}]}`, 0},                    // nobody
		{`{"event":"Order Completed","atLeast":1,"where":[{"property":"revenue","gt":5}]}`, 0},     // a new aggregate: no backfill
		{`{"any":[{"computedTrait":"orders","gt":0},{"event":"Order Completed","atLeast":3}]}`, 9}, // i%4 != 0
		// Audience conditions name the config's audiences (vip: the even users).
		{`{"audience":"vip"}`, 6},
		{`{"not":{"audience":"vip"}}`, 6},
		{`{"all":[{"audience":"vip"},{"event":"Order Completed"}]}`, 3}, // 2, 6, 10
		// between: every order is recent.
		{`{"event":"Order Completed","between":["2h","1h"]}`, 0},
		{`{"event":"Order Completed","between":["2h","0s"]}`, 9},
	} {
		if v := count(tt.rule, ""); v.Count != tt.want {
			t.Errorf("preview %s: count %d, want %d", tt.rule, v.Count, tt.want)
		}
	}
	// The same rule as the vip audience counts its members.
	var a audiences.AudienceView
	h.Get(api(svc)+"/v1/audiences/vip", testToken, &a)
	if v := count(`{"trait":"plan","in":["pro","team"]}`, ""); v.Count != 6 {
		t.Errorf("vip's rule: %d", v.Count)
	}
	// A where nobody counts yet is flagged; the window is evaluated at now.
	if v := count(`{"event":"Order Completed","where":[{"property":"revenue","gt":5}]}`, ""); !v.NewAggregate {
		t.Errorf("a new where is not flagged: %+v", v)
	}
	if v := count(`{"event":"Order Completed","atLeast":2}`, ""); v.NewAggregate {
		t.Errorf("a plain count is flagged: %+v", v)
	}
	later := at(3 * time.Hour)
	if v := count(`{"event":"Order Completed","atLeast":1,"within":"1h"}`, later); v.Count != 0 || v.At != later {
		t.Errorf("1h window evaluated 3h later: %+v", v)
	}
	if v := count(`{"event":"Order Completed","atLeast":1}`, later); v.Count != 9 {
		t.Errorf("ever, 3h later: %+v", v)
	}

	// Errors: the token, a body that is not one, an invalid rule naming its field.
	var e struct{ Code, Message string }
	if code := h.Post(api(svc)+"/v1/audiences/preview", "", `{"rule":{"trait":"plan","equals":"pro"}}`, &e); code != http.StatusUnauthorized || e.Code != "unauthorized" {
		t.Errorf("no token: %d %+v", code, e)
	}
	for body, want := range map[string]string{
		`{"rule":{"all":[{"event":"x","atLeast":-1}]}}`:             "rule.all[0].atLeast: ",
		`{"rule":{"event":"x","within":"forever"}}`:                 "rule.within: ",
		`{"rule":{"event":"x","colour":"red"}}`:                     `unknown field "colour"`,
		`{"rule":{}}`:                                               "rule: needs one of",
		`{}`:                                                        "rule: is required",
		`{"rule":{"trait":"plan","equals":1},"zone":"x"}`:           "the body must be",
		`{"rule":{"trait":"plan","exists":true},"now":"yesterday"}`: "now: ",
		`not json`: "the body must be",
	} {
		e = struct{ Code, Message string }{}
		if code := h.Post(api(svc)+"/v1/audiences/preview", testToken, body, &e); code != http.StatusBadRequest || e.Code != "bad_request" || !strings.Contains(e.Message, want) {
			t.Errorf("%s: %d %+v, want a 400 with %q", body, code, e, want)
		}
	}
	// Over a limit is a 4xx with a message, never a 500 (docs/audiences.md#profile-api): a body
	// over 1 MiB is 413, headers over platform.DefaultMaxHeaderBytes 431.
	e = struct{ Code, Message string }{}
	big := `{"rule":{"trait":"plan","equals":"` + strings.Repeat("p", 3<<20) + `"}}`
	if code := h.Post(api(svc)+"/v1/audiences/preview", testToken, big, &e); code != http.StatusRequestEntityTooLarge || e.Code != "too_large" || !strings.Contains(e.Message, "1048576") {
		t.Errorf("a 3 MB body: %d %+v, want a 413 too_large", code, e)
	}
	if code := h.Call(http.MethodGet, api(svc)+"/v1/profiles/u1", "", "Authorization", servicetest.Bearer(testToken), "X-Big", strings.Repeat("h", 3<<20)).Status; code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 3 MB header: %d, want 431", code)
	}
	if code := h.Get(api(svc)+"/v1/audiences/preview", testToken, nil); code == http.StatusOK {
		t.Errorf("GET /v1/audiences/preview: %d", code)
	}
}

// TestPreviewOverTwoInstances: each instance counts its own partitions and asks the other for
// its own; either answers the whole count.
func TestPreviewOverTwoInstances(t *testing.T) { synctest.Test(t, testPreviewOverTwoInstances) }

func testPreviewOverTwoInstances(t *testing.T) {
	h := newHarness(t, sources+vip)
	addrA, addrB := h.addr(), h.addr()
	with := func(addr string) func(*audiences.Config) {
		return func(c *audiences.Config) { c.Addr, c.PeerURL = addr, "http://{instance}" }
	}
	a, _, _ := h.run(addrA, with(addrA))
	b, _, _ := h.run(addrB, with(addrB))
	const users = 20
	for i := range users {
		plan := "free"
		if i < 15 {
			plan = "pro"
		}
		h.send(fmt.Sprintf(`{"type":"identify","userId":"u%02d","traits":{"plan":%q}}`, i, plan))
	}
	servicetest.Eventually(t, 30*time.Second, "the preview from both instances", func() string {
		for _, svc := range []*audiences.Service{a, b} {
			var v audiences.PreviewView
			code := h.Post(api(svc)+"/v1/audiences/preview", testToken, `{"rule":{"trait":"plan","equals":"pro"}}`, &v)
			if code != http.StatusOK || v.Count != 15 || v.Profiles != users || v.Partial || v.Partitions != 3 {
				return fmt.Sprintf("preview from %s: %d %+v", svc.Addr(), code, v)
			}
			var local audiences.PreviewView
			h.Post(api(svc)+"/v1/audiences/preview?scope=local", testToken, `{"rule":{"trait":"plan","equals":"pro"}}`, &local)
			if local.Partitions == 3 || local.Partitions == 0 {
				return fmt.Sprintf("scope=local of %s covers %d partitions: both instances should own some", svc.Addr(), local.Partitions)
			}
		}
		return ""
	})
}
