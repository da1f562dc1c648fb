package audiences_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tributary-cdp/tributary/audiences"
	"github.com/tributary-cdp/tributary/platform/servicetest"
)

// The space id of Segment's documentation examples.
const segmentSpace = "lg8283283"

// basic is the Authorization of Segment's Profile API: the token as the user name of HTTP
// Basic auth, an empty password (curl -u $TOKEN:).
func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// segmentAnswer is every answer shape of Segment's Profile API, decoded loosely.
type segmentAnswer struct {
	Traits   map[string]json.RawMessage `json:"traits"`
	Data     []map[string]any           `json:"data"`
	Metadata map[string]any             `json:"metadata"`
	Cursor   struct {
		URL     string `json:"url"`
		HasMore bool   `json:"has_more"`
		Next    string `json:"next"`
		Limit   int    `json:"limit"`
	} `json:"cursor"`
	Error struct{ Code, Message string } `json:"error"`
}

// segmentGet GETs a path of Segment's Profile API (after /v1/spaces/<space>/collections/users/
// profiles/) with Basic auth and decodes the answer.
func segmentGet(h *harness, svc *audiences.Service, path string) (int, segmentAnswer) {
	h.t.Helper()
	a := h.Call(http.MethodGet, api(svc)+"/v1/spaces/"+segmentSpace+"/collections/users/profiles/"+path, "", "Authorization", basic(testToken, ""))
	var v segmentAnswer
	a.Decode(h.t, &v)
	return a.Status, v
}

func keys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestSegmentProfileAPI: the requests of Segment's documentation (paths, include, class,
// limit, paging across pages, verbose, 404 for an unknown profile, 400 for a bad limit or
// class) answered with Segment's shapes and error bodies; an anonymous id merged into a user
// answers with the user's profile; events newest first, paged, filtered, within the lookback
// and bounded per profile, and still there after a restart (restored from audiences.state).
func TestSegmentProfileAPI(t *testing.T) { synctest.Test(t, testSegmentProfileAPI) }

func testSegmentProfileAPI(t *testing.T) {
	h := newHarness(t, sources+vip+orders)
	with := func(c *audiences.Config) { c.SpaceID, c.ProfileEvents = segmentSpace, 4 }
	svc, _, stop := h.run("aud-segment", with)
	// u1: 11 identify traits, 5 orders (revenue 10 each, 4 kept), an anonymous id merged in.
	h.send(`{"type":"track","anonymousId":"a1","event":"Product Viewed","properties":{"sku":"s1"},"timestamp":"` + at(-20*24*time.Hour) + `"}`)
	h.send(`{"type":"identify","userId":"u1","anonymousId":"a1","traits":{"first_name":"Bob","last_name":"Smith","city":"Paris","age":42,"plan":"pro","a1":1,"a2":2,"a3":3,"a4":4,"a5":5,"a6":6}}`)
	for i := range 5 {
		h.send(fmt.Sprintf(`{"type":"track","userId":"u1","messageId":"o%d","event":"Order Completed","properties":{"revenue":10,"n":%d},"timestamp":%q}`, i, i, at(time.Duration(i-10)*time.Minute)))
	}
	servicetest.Eventually(t, 20*time.Second, "u1 with its orders and a1 merged", func() string {
		code, v := segmentGet(h, svc, "anonymous_id:a1/traits?include=orders_total")
		if code != http.StatusOK || string(v.Traits["orders_total"]) != "50" {
			return fmt.Sprintf("traits of a1: %d %+v", code, v)
		}
		return ""
	})

	// Paging: 10 traits a page by default, in the order of their names, then the rest.
	all := []string{"a1", "a2", "a3", "a4", "a5", "a6", "age", "city", "first_name", "last_name", "orders_total", "plan", "vip"}
	code, p1 := segmentGet(h, svc, "user_id:u1/traits")
	if code != http.StatusOK || !reflect.DeepEqual(keys(p1.Traits), all[:10]) || !p1.Cursor.HasMore || p1.Cursor.Next != "orders_total" || p1.Cursor.Limit != 10 {
		t.Fatalf("first page: %d %v %+v", code, keys(p1.Traits), p1.Cursor)
	}
	if want := "/v1/spaces/" + segmentSpace + "/collections/users/profiles/user_id:u1/traits"; p1.Cursor.URL != want {
		t.Errorf("cursor url %q, want %q", p1.Cursor.URL, want)
	}
	code, p2 := segmentGet(h, svc, "user_id:u1/traits?next="+p1.Cursor.Next)
	if code != http.StatusOK || !reflect.DeepEqual(keys(p2.Traits), all[10:]) || p2.Cursor.HasMore || p2.Cursor.Next != "" {
		t.Fatalf("second page: %d %v %+v", code, keys(p2.Traits), p2.Cursor)
	}
	if string(p2.Traits["vip"]) != "true" || string(p2.Traits["orders_total"]) != "50" || string(p1.Traits["first_name"]) != `"Bob"` {
		t.Errorf("values: %s %s", p1.Traits, p2.Traits)
	}
	for _, tt := range []struct {
		query string
		want  map[string]string
	}{
		{"include=first_name,city", map[string]string{"first_name": `"Bob"`, "city": `"Paris"`}},
		{"class=audience", map[string]string{"vip": "true"}},
		{"class=computed_trait", map[string]string{"orders_total": "50"}},
		{"class=computed_trait&include=first_name", map[string]string{}},
		{"limit=2", map[string]string{"a1": "1", "a2": "2"}},
		{"include=age&verbose=true", map[string]string{"age": `{"value":42}`}},
	} {
		code, v := segmentGet(h, svc, "user_id:u1/traits?"+tt.query)
		got := map[string]string{}
		for k, raw := range v.Traits {
			got[k] = string(raw)
		}
		if code != http.StatusOK || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("traits?%s: %d %v, want %v", tt.query, code, got, tt.want)
		}
	}

	// Errors: Segment's bodies.
	for _, tt := range []struct {
		path, auth string
		status     int
		code       string
	}{
		{"user_id:nobody/traits", basic(testToken, ""), http.StatusNotFound, "not_found"},
		{"anonymous_id:u1/traits", basic(testToken, ""), http.StatusNotFound, "not_found"}, // u1 is a user id
		{"user_id:u1/traits?limit=0", basic(testToken, ""), http.StatusBadRequest, "validation_error"},
		{"user_id:u1/traits?limit=201", basic(testToken, ""), http.StatusBadRequest, "validation_error"},
		{"user_id:u1/events?limit=101", basic(testToken, ""), http.StatusBadRequest, "validation_error"},
		{"user_id:u1/traits?class=user", basic(testToken, ""), http.StatusBadRequest, "invalid_request_error"},
		{"user_id:u1/events?start=yesterday", basic(testToken, ""), http.StatusBadRequest, "invalid_request_error"},
		{"phone:1/traits", basic(testToken, ""), http.StatusBadRequest, "validation_error"},
		{"u1/traits", basic(testToken, ""), http.StatusBadRequest, "validation_error"},
		{"user_id:u1/traits", "", http.StatusUnauthorized, "authentication_error"},
		{"user_id:u1/traits", basic("wrong-token-0123456789", ""), http.StatusUnauthorized, "authentication_error"},
		{"user_id:u1/traits", basic(testToken, "a-password"), http.StatusUnauthorized, "authentication_error"},
		{"user_id:u1/traits", servicetest.Bearer("wrong-token-0123456789"), http.StatusUnauthorized, "authentication_error"},
	} {
		a := h.Call(http.MethodGet, api(svc)+"/v1/spaces/"+segmentSpace+"/collections/users/profiles/"+tt.path, "", "Authorization", tt.auth)
		var v segmentAnswer
		a.Decode(t, &v)
		if a.Status != tt.status || v.Error.Code != tt.code || v.Error.Message == "" {
			t.Errorf("%s (%q): %d %s, want %d %s", tt.path, tt.auth, a.Status, a.Body, tt.status, tt.code)
		}
		if tt.status == http.StatusNotFound && v.Error.Message != "Profile was not found." {
			t.Errorf("%s: 404 message %q", tt.path, v.Error.Message)
		}
	}
	// The space must be AUDIENCES_SPACE_ID; a Bearer token works too; today's routes keep
	// asking for a Bearer token.
	if a := h.Call(http.MethodGet, api(svc)+"/v1/spaces/other/collections/users/profiles/user_id:u1/traits", "", "Authorization", basic(testToken, "")); a.Status != http.StatusNotFound {
		t.Errorf("another space: %d %s", a.Status, a.Body)
	}
	if a := h.Call(http.MethodGet, api(svc)+"/v1/spaces/"+segmentSpace+"/collections/users/profiles/user_id:u1/metadata", "", "Authorization", servicetest.Bearer(testToken)); a.Status != http.StatusOK {
		t.Errorf("Bearer: %d %s", a.Status, a.Body)
	}
	if a := h.Call(http.MethodGet, api(svc)+"/v1/profiles/u1", "", "Authorization", basic(testToken, "")); a.Status != http.StatusUnauthorized {
		t.Errorf("/v1/profiles with Basic: %d", a.Status)
	}

	// An id with a slash and a plus, escaped as Segment's documentation says.
	h.send(`{"type":"identify","userId":"team/ada+1","traits":{"plan":"pro"}}`)
	servicetest.Eventually(t, 20*time.Second, "an escaped user id", func() string {
		if code, v := segmentGet(h, svc, "user_id:team%2Fada%2B1/traits"); code != http.StatusOK || string(v.Traits["plan"]) != `"pro"` {
			return fmt.Sprintf("%d %+v", code, v)
		}
		return ""
	})

	// external_ids, metadata, links.
	code, ids := segmentGet(h, svc, "user_id:u1/external_ids")
	if code != http.StatusOK || len(ids.Data) != 2 || ids.Data[0]["type"] != "user_id" || ids.Data[0]["id"] != "u1" ||
		ids.Data[1]["type"] != "anonymous_id" || ids.Data[1]["id"] != "a1" || ids.Data[0]["collection"] != "users" || ids.Cursor.HasMore {
		t.Errorf("external_ids: %d %+v", code, ids)
	}
	code, ids = segmentGet(h, svc, "user_id:u1/external_ids?limit=1")
	if code != http.StatusOK || len(ids.Data) != 1 || !ids.Cursor.HasMore {
		t.Fatalf("external_ids limit 1: %d %+v", code, ids)
	}
	if code, ids = segmentGet(h, svc, "user_id:u1/external_ids?limit=1&next="+ids.Cursor.Next); code != http.StatusOK || len(ids.Data) != 1 || ids.Data[0]["id"] != "a1" || ids.Cursor.HasMore {
		t.Errorf("external_ids page 2: %d %+v", code, ids)
	}
	if code, ids = segmentGet(h, svc, "user_id:u1/external_ids?include=anonymous_id"); code != http.StatusOK || len(ids.Data) != 1 || ids.Data[0]["id"] != "a1" {
		t.Errorf("external_ids include: %d %+v", code, ids)
	}
	code, meta := segmentGet(h, svc, "user_id:u1/metadata")
	if _, ok := meta.Metadata["expires_at"]; code != http.StatusOK || meta.Metadata["created_at"] == nil || meta.Metadata["updated_at"] == nil || !ok {
		t.Errorf("metadata: %d %+v", code, meta)
	}
	if code, links := segmentGet(h, svc, "user_id:u1/links"); code != http.StatusOK || links.Data == nil || len(links.Data) != 0 {
		t.Errorf("links: %d %+v", code, links)
	}

	// Events: the 4 newest of 5 orders (the viewed product is older than 14 days), newest first.
	events := func(query string) []string {
		t.Helper()
		var out []string
		next := ""
		for page := 0; page < 10; page++ {
			q := query
			if next != "" {
				q += "&next=" + url.QueryEscape(next)
			}
			code, v := segmentGet(h, svc, "user_id:u1/events?"+q)
			if code != http.StatusOK {
				t.Fatalf("events?%s: %d %+v", q, code, v)
			}
			for _, e := range v.Data {
				out = append(out, e["message_id"].(string))
				if e["type"] != "track" || e["event"] != "Order Completed" || e["source_id"] != "web" || e["properties"].(map[string]any)["revenue"] != 10.0 {
					t.Errorf("event %+v", e)
				}
			}
			if next = v.Cursor.Next; !v.Cursor.HasMore {
				return out
			}
		}
		t.Fatalf("events?%s: more than 10 pages", query)
		return nil
	}
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"", []string{"o4", "o3", "o2", "o1"}},
		{"limit=3", []string{"o4", "o3", "o2", "o1"}},
		{"limit=1&sort=asc", []string{"o1", "o2", "o3", "o4"}},
		{"include=Order%20Completed&limit=2", []string{"o4", "o3", "o2", "o1"}},
		{"exclude=Order%20Completed", nil},
		{"start=" + url.QueryEscape(at(-8*time.Minute)), []string{"o4", "o3"}},
		{"end=" + url.QueryEscape(at(-8*time.Minute)), []string{"o2", "o1"}},
	} {
		if got := events(tt.query); !slices.Equal(got, tt.want) {
			t.Errorf("events?%s: %v, want %v", tt.query, got, tt.want)
		}
	}

	// After a restart the events come back from audiences.state.
	stop()
	svc, _, _ = h.run("aud-segment", with)
	servicetest.Eventually(t, 20*time.Second, "the events after a restart", func() string {
		code, v := segmentGet(h, svc, "anonymous_id:a1/events")
		if code != http.StatusOK || len(v.Data) != 4 {
			return fmt.Sprintf("events: %d %+v", code, v)
		}
		return ""
	})
}

// TestSegmentProfileAPIRateLimit: beyond AUDIENCES_PROFILE_API_RATE requests in a second, 429
// with Retry-After and Segment's rate_limit_error; a second later, answered again.
func TestSegmentProfileAPIRateLimit(t *testing.T) { synctest.Test(t, testSegmentProfileAPIRateLimit) }

func testSegmentProfileAPIRateLimit(t *testing.T) {
	h := newHarness(t, sources)
	svc, _, _ := h.run("aud-rate", func(c *audiences.Config) { c.ProfileAPIRate = 3 })
	h.send(`{"type":"identify","userId":"u1","traits":{"plan":"pro"}}`)
	servicetest.Eventually(t, 20*time.Second, "u1", func() string {
		if code, v := segmentGet(h, svc, "user_id:u1/traits"); code != http.StatusOK {
			return fmt.Sprintf("%d %+v", code, v)
		}
		return ""
	})
	time.Sleep(2 * time.Second) // the bucket full again
	for i := range 3 {
		if code, v := segmentGet(h, svc, "user_id:u1/traits"); code != http.StatusOK {
			t.Fatalf("request %d: %d %+v", i, code, v)
		}
	}
	a := h.Call(http.MethodGet, api(svc)+"/v1/spaces/s/collections/users/profiles/user_id:u1/traits", "", "Authorization", basic(testToken, ""))
	var v segmentAnswer
	a.Decode(t, &v)
	if a.Status != http.StatusTooManyRequests || a.Header.Get("Retry-After") != "1" || v.Error.Code != "rate_limit_error" {
		t.Fatalf("4th request: %d %v %s", a.Status, a.Header, a.Body)
	}
	// Today's routes are not limited.
	if code := h.Get(api(svc)+"/v1/profiles/u1", testToken, nil); code != http.StatusOK {
		t.Errorf("/v1/profiles: %d", code)
	}
	time.Sleep(time.Second)
	if code, v := segmentGet(h, svc, "user_id:u1/traits"); code != http.StatusOK {
		t.Errorf("a second later: %d %+v", code, v)
	}
}

// TestSegmentProfileAPITwoInstances: either instance answers Segment's paths for any user,
// forwarding to the owner of the user's partition (with the caller's Basic auth).
func TestSegmentProfileAPITwoInstances(t *testing.T) {
	synctest.Test(t, testSegmentProfileAPITwoInstances)
}

func testSegmentProfileAPITwoInstances(t *testing.T) {
	h := newHarness(t, sources+orders)
	addrA, addrB := h.addr(), h.addr()
	with := func(addr string) func(*audiences.Config) {
		return func(c *audiences.Config) { c.Addr, c.PeerURL = addr, "http://{instance}" }
	}
	a, _, _ := h.run(addrA, with(addrA))
	b, _, _ := h.run(addrB, with(addrB))
	const users = 12
	for i := range users {
		h.track(fmt.Sprintf("u%02d", i), "Order Completed", `{"revenue":7}`)
	}
	servicetest.Eventually(t, 30*time.Second, "every user from either instance", func() string {
		for i := range users {
			for _, svc := range []*audiences.Service{a, b} {
				path := fmt.Sprintf("user_id:u%02d/traits?class=computed_trait", i)
				if code, v := segmentGet(h, svc, path); code != http.StatusOK || string(v.Traits["orders_total"]) != "7" {
					return fmt.Sprintf("%s from %s: %d %+v", path, svc.Addr(), code, v)
				}
			}
		}
		return ""
	})
	if code, v := segmentGet(h, a, "user_id:nobody/traits"); code != http.StatusNotFound || !strings.Contains(v.Error.Message, "not found") {
		t.Errorf("unknown user from a: %d %+v", code, v)
	}
}
