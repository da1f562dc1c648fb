package audiences_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/audiences"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

const sources = `
sources:
  - id: web
    name: Web
    writeKey: wk_web
  - id: engage
    name: Engage
    writeKey: wk_engage
`

const orders = `
computedTraits:
  - id: orders
    name: Orders Total
    source: engage
    sum:
      event: Order Completed
      property: revenue
`

const buyers = `
audiences:
  - id: buyers
    name: Repeat Buyers
    source: engage
    rule:
      event: Order Completed
      atLeast: 2
      within: 1h
`

// TestSyncSendsMembersThenChanges: a new audience over existing profiles sends one identify
// per member; later syncs send only joins and leaves; a window that expires makes a member
// leave without any new event.
func TestSyncSendsMembersThenChanges(t *testing.T) { synctest.Test(t, testSyncSendsMembersThenChanges) }

func testSyncSendsMembersThenChanges(t *testing.T) {
	h := newHarness(t, sources+orders)
	svc, _, _ := h.run("aud-0", nil)
	for i := range 5 {
		u := fmt.Sprintf("u%d", i)
		h.track(u, "Order Completed", `{"revenue":10}`)
		if i < 3 {
			h.track(u, "Order Completed", `{"revenue":5}`)
		}
	}
	// The computed trait's first values.
	got := h.identifies(5, 10*time.Second)
	users := byUser(got)
	for i := range 5 {
		u := fmt.Sprintf("u%d", i)
		want := map[string]any{"orders_total": 10.0}
		if i < 3 {
			want = map[string]any{"orders_total": 15.0}
		}
		if fmt.Sprint(users[u]) != fmt.Sprint(want) {
			t.Errorf("computed trait, %s: got %v, want %v", u, users[u], want)
		}
	}
	h.quiet(1500 * time.Millisecond) // nothing changed: nothing sent

	// A new audience over the existing profiles: one identify per member, true.
	h.Apply(sources + orders + buyers)
	got = h.identifies(3, 10*time.Second)
	users = byUser(got)
	for i := range 5 {
		u := fmt.Sprintf("u%d", i)
		var want map[string]any
		if i < 3 {
			want = map[string]any{"repeat_buyers": true}
		}
		if fmt.Sprint(users[u]) != fmt.Sprint(want) {
			t.Errorf("first sync, %s: got %v, want %v", u, users[u], want)
		}
	}
	for _, id := range got {
		if id.source != "engage" || id.key != id.UserID {
			t.Errorf("identify %v: source %q key %q", id, id.source, id.key)
		}
		if p := id.Context.Personas; p["audience_id"] != "buyers" || p["audience_key"] != "repeat_buyers" || p["computation_class"] != "audience" {
			t.Errorf("audience identify personas: %v", p)
		}
	}

	// A later sync: only the user who joined.
	h.track("u3", "Order Completed", `{"revenue":1}`)
	got = h.identifies(2, 10*time.Second)
	if u := byUser(got); len(got) != 2 || fmt.Sprint(u["u3"]) != fmt.Sprint(map[string]any{"repeat_buyers": true, "orders_total": 11.0}) {
		t.Fatalf("second sync: %v", got)
	}
	h.quiet(2500 * time.Millisecond)

	// The window (1h) passes: every member leaves at the next sync, no event needed. The
	// all-time sum does not change.
	h.advance(61 * time.Minute)
	got = h.identifies(4, 10*time.Second)
	for _, id := range got {
		if len(id.Traits) != 1 || id.Traits["repeat_buyers"] != false {
			t.Errorf("after the window: %v, want repeat_buyers false", id)
		}
	}
	var a audiences.AudienceView
	servicetest.Eventually(t, 5*time.Second, "the audience emptied by the window", func() string {
		h.Get(api(svc)+"/v1/audiences/buyers", testToken, &a)
		if a.Members != 0 || a.LastSync.Leaves+a.LastSync.Joins != 0 && a.LastSync.Leaves != 4 {
			return fmt.Sprintf("audience view after the window: %+v", a)
		}
		return ""
	})
	h.quiet(2500 * time.Millisecond)
}

// TestRealtimeAudience: a realtime audience sends the join within a second of the event.
func TestRealtimeAudience(t *testing.T) { synctest.Test(t, testRealtimeAudience) }

func testRealtimeAudience(t *testing.T) {
	h := newHarness(t, sources+`
audiences:
  - id: vip
    name: VIP
    source: engage
    realtime: true
    rule:
      trait: plan
      equals: pro
`)
	cfgSlow := func(c *audiences.Config) { c.SyncInterval = time.Hour }
	h.run("aud-rt", cfgSlow)
	h.send(`{"type":"identify","userId":"u1","traits":{"plan":"free"}}`)
	h.quiet(time.Second)
	start := time.Now()
	h.send(`{"type":"identify","userId":"u1","traits":{"plan":"pro"}}`)
	got := h.identifies(1, 5*time.Second)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the realtime join took %v", took)
	}
	if len(got) != 1 || got[0].UserID != "u1" || got[0].Traits["vip"] != true {
		t.Fatalf("realtime join: %v", got)
	}
	h.send(`{"type":"identify","userId":"u1","traits":{"plan":null}}`)
	got = h.identifies(1, 5*time.Second)
	if len(got) != 1 || got[0].Traits["vip"] != false {
		t.Fatalf("realtime leave (trait removed by null): %v", got)
	}
}

// onOtherPartitions returns an anonymous id and a user id whose profiles live on different
// partitions of tracking.events (3 in the harness).
func onOtherPartitions(t *testing.T) (anon, user string) {
	t.Helper()
	part := kgo.StickyKeyPartitioner(nil).ForTopic(schemas.TopicEvents)
	of := func(id string) int { return part.Partition(&kgo.Record{Key: []byte(id)}, 3) }
	for i := range 100 {
		anon, user = fmt.Sprintf("anon-%d", i), fmt.Sprintf("user-%d", i)
		if of(anon) != of(user) {
			return anon, user
		}
	}
	t.Fatal("no ids on different partitions")
	return "", ""
}

// TestMergeAcrossPartitions: the events of an anonymous id count for the user it is
// identified as, though the two profiles live on different partitions, before and after the
// identify; the anonymous profile sends nothing of its own.
func TestMergeAcrossPartitions(t *testing.T) { synctest.Test(t, testMergeAcrossPartitions) }

func testMergeAcrossPartitions(t *testing.T) {
	h := newHarness(t, sources+`
audiences:
  - id: loyal
    name: Loyal
    source: engage
    rule:
      event: Order Completed
      atLeast: 4
computedTraits:
  - id: plans
    name: Plans Seen
    source: engage
    uniqueList:
      event: Order Completed
      property: plan
`)
	anon, user := onOtherPartitions(t)
	svc, _, stop := h.run("aud-merge", func(c *audiences.Config) { c.SyncInterval = time.Hour })
	order := func(idField, id, plan string) string {
		return fmt.Sprintf(`{"type":"track",%q:%q,"event":"Order Completed","properties":{"plan":%q}}`, idField, id, plan)
	}
	h.send(order("anonymousId", anon, "free"), order("anonymousId", anon, "free"))
	h.send(fmt.Sprintf(`{"type":"identify","userId":%q,"anonymousId":%q,"traits":{"email":"a@example.com"}}`, user, anon))
	h.send(order("userId", user, "pro"))
	h.send(order("anonymousId", anon, "team")) // after the merge: still the user's
	servicetest.Eventually(t, 10*time.Second, "the merged profile in the audience", func() string {
		var p audiences.ProfileView
		h.Get(api(svc)+"/v1/profiles/"+user, testToken, &p)
		if len(p.Audiences) != 1 || p.Audiences[0].ID != "loyal" || !sameSet(p.ComputedTraits["plans_seen"], "free", "pro", "team") {
			return fmt.Sprintf("profile of %s: %+v %s", user, p, p.ComputedTraits["plans_seen"])
		}
		if len(p.MergedIDs) != 1 || p.MergedIDs[0] != anon {
			return fmt.Sprintf("merged ids: %v", p.MergedIDs)
		}
		return ""
	})
	// The anonymous id answers with the profile it was merged into.
	var p audiences.ProfileView
	if code := h.Get(api(svc)+"/v1/profiles/"+anon, testToken, &p); code != http.StatusOK || p.UserID != user {
		t.Fatalf("profile of the merged anonymous id: %d %+v", code, p)
	}
	// The first sync, by the same instance restarted with a short interval (so restored from
	// audiences.state): one profile, the user's; the anonymous one sends nothing.
	stop()
	svc, _, _ = h.run("aud-merge", nil)
	got := h.identifies(2, 15*time.Second)
	u := byUser(got)
	plans, _ := json.Marshal(u[user]["plans_seen"])
	if len(got) != 2 || u[user]["loyal"] != true || !sameSet(plans, "free", "pro", "team") {
		t.Fatalf("sync after the merge: got %v", u)
	}
	if code := h.Get(api(svc)+"/v1/profiles/"+anon, testToken, &p); code != http.StatusOK || p.UserID != user {
		t.Fatalf("after the restart, profile of the merged anonymous id: %d %+v", code, p)
	}
	h.quiet(2500 * time.Millisecond)
}

// sameSet reports whether list (a JSON list of strings) holds exactly want, in any order.
func sameSet(list json.RawMessage, want ...string) bool {
	var got []string
	if json.Unmarshal(list, &got) != nil {
		return false
	}
	slices.Sort(got)
	slices.Sort(want)
	return slices.Equal(got, want)
}

const vip = `
audiences:
  - id: vip
    name: VIP
    source: engage
    rule:
      trait: plan
      in: [pro, team]
`

func (h *harness) deletion(user, kind string) {
	h.t.Helper()
	h.Produce(&kgo.Record{Topic: schemas.TopicDeletions, Key: []byte(user),
		Value: fmt.Appendf(nil, `{"userId":%q,"kind":%q}`, user, kind)})
}

// TestDeletionAndSuppression: a deletion removes the profile (a tombstone on audiences.state)
// and its membership, with no identify for that user afterwards; a suppressed user's later
// events build no profile until it is unsuppressed.
func TestDeletionAndSuppression(t *testing.T) { synctest.Test(t, testDeletionAndSuppression) }

func testDeletionAndSuppression(t *testing.T) {
	h := newHarness(t, sources+vip)
	svc, reg, _ := h.run("aud-del", nil)
	h.send(`{"type":"identify","userId":"gone","traits":{"plan":"pro"}}`,
		`{"type":"identify","userId":"quiet","traits":{"plan":"pro"}}`,
		`{"type":"identify","userId":"stays","traits":{"plan":"pro"}}`)
	if got := h.identifies(3, 10*time.Second); len(got) != 3 {
		t.Fatalf("first sync: %v", got)
	}
	h.deletion("gone", schemas.KindDeleteOnly)
	h.deletion("quiet", schemas.KindSuppressOnly)
	servicetest.Eventually(t, 10*time.Second, "the deleted and the suppressed profile gone", func() string {
		for _, u := range []string{"gone", "quiet"} {
			if code := h.Get(api(svc)+"/v1/profiles/"+u, testToken, nil); code != http.StatusNotFound {
				return fmt.Sprintf("profile %s after its deletion: %d", u, code)
			}
		}
		return ""
	})
	// The suppressed user's events build nothing; the deleted one's start afresh.
	h.send(`{"type":"identify","userId":"quiet","traits":{"plan":"team"}}`)
	h.quiet(2500 * time.Millisecond)
	if code := h.Get(api(svc)+"/v1/profiles/quiet", testToken, nil); code != http.StatusNotFound {
		t.Fatalf("a suppressed user's profile: %d", code)
	}
	var a audiences.AudienceView
	h.Get(api(svc)+"/v1/audiences/vip", testToken, &a)
	if a.Members != 1 {
		t.Errorf("members after the deletions: %+v", a)
	}
	// The changelog holds tombstones for the deleted profile.
	r := h.Reader(schemas.TopicAudiencesState)
	r.Poll()
	tomb := false
	for _, rec := range r.Got {
		if string(rec.Key) == "gone" && rec.Value == nil {
			tomb = true
		}
	}
	if !tomb {
		t.Error("no tombstone for the deleted profile on audiences.state")
	}
	// Unsuppressed: the next events count again (once the request reached the profile's
	// partition: it goes through tracking.deletions, the events do not).
	h.deletion("quiet", schemas.KindUnsuppress)
	servicetest.Eventually(t, 10*time.Second, "three deletion requests applied", func() string {
		if n := servicetest.Counter(t, reg, "tributary_audiences_deletion_requests_total"); n != 3 {
			return fmt.Sprintf("deletion requests applied: %v", n)
		}
		return ""
	})
	h.send(`{"type":"identify","userId":"quiet","traits":{"plan":"team"}}`)
	got := h.identifies(1, 10*time.Second)
	if len(got) != 1 || got[0].UserID != "quiet" || got[0].Traits["vip"] != true {
		t.Fatalf("after unsuppressing: %v", got)
	}
}

// TestRestartResendsNothing: a restarted instance restores its partitions from
// audiences.state (the profile API answers as before) and sends nothing again.
func TestRestartResendsNothing(t *testing.T) { synctest.Test(t, testRestartResendsNothing) }

func testRestartResendsNothing(t *testing.T) {
	h := newHarness(t, sources+vip+orders)
	_, _, stop := h.run("aud-restart", nil)
	for i := range 20 {
		h.send(fmt.Sprintf(`{"type":"identify","userId":"u%d","traits":{"plan":"pro"}}`, i))
		h.track(fmt.Sprintf("u%d", i), "Order Completed", `{"revenue":3}`)
	}
	if got := h.identifies(40, 15*time.Second); len(got) != 40 {
		t.Fatalf("first sync: %d identify calls", len(got))
	}
	stop()
	svc, reg, _ := h.run("aud-restart", nil)
	servicetest.Eventually(t, 10*time.Second, "the profile restored after the restart", func() string {
		var p audiences.ProfileView
		if code := h.Get(api(svc)+"/v1/profiles/u7", testToken, &p); code != http.StatusOK || string(p.ComputedTraits["orders_total"]) != "3" {
			return fmt.Sprintf("profile after the restart: %d %+v", code, p)
		}
		return ""
	})
	h.quiet(3 * time.Second) // three syncs
	if n := servicetest.Counter(t, reg, "tributary_audiences_restores_total"); n < 1 {
		t.Errorf("restores: %v", n)
	}
	// And it goes on: a change is sent once.
	h.track("u7", "Order Completed", `{"revenue":4}`)
	got := h.identifies(1, 10*time.Second)
	if len(got) != 1 || got[0].Traits["orders_total"] != 7.0 {
		t.Fatalf("after the restart: %v", got)
	}
}

// TestProfileAPI: the bearer token, 404s, a paged member list that covers every member once.
func TestProfileAPI(t *testing.T) { synctest.Test(t, testProfileAPI) }

func testProfileAPI(t *testing.T) {
	h := newHarness(t, sources+vip)
	svc, _, _ := h.run("aud-api", func(c *audiences.Config) { c.Token = testToken })
	const n = 25
	for i := range n {
		h.send(fmt.Sprintf(`{"type":"identify","userId":"u%02d","traits":{"plan":"pro"}}`, i))
	}
	h.send(`{"type":"identify","anonymousId":"anon-9","traits":{"plan":"team"}}`)
	h.send(`{"type":"identify","userId":"free-1","traits":{"plan":"free"}}`)
	h.identifies(n+1, 10*time.Second)

	var e struct{ Code, Message string }
	if code := h.Get(api(svc)+"/v1/profiles/u01", "", &e); code != http.StatusUnauthorized || e.Code != "unauthorized" {
		t.Errorf("no token: %d %+v", code, e)
	}
	if code := h.Get(api(svc)+"/v1/profiles/u01", "wrong", nil); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", code)
	}
	// The scheme in any case (RFC 7235), as the console's API takes it.
	for _, scheme := range []string{"bearer", "BEARER"} {
		if code := h.Call(http.MethodGet, api(svc)+"/v1/profiles/nobody", "", "Authorization", scheme+" "+testToken).Status; code != http.StatusNotFound {
			t.Errorf("Authorization: %s <token>: %d, want 404 (let in, no such profile)", scheme, code)
		}
	}
	if code := h.Get(api(svc)+"/healthz", "", nil); code != http.StatusOK {
		t.Errorf("/healthz without a token: %d", code)
	}
	if code := h.Get(api(svc)+"/v1/profiles/nobody", testToken, &e); code != http.StatusNotFound {
		t.Errorf("unknown profile: %d", code)
	}
	if code := h.Get(api(svc)+"/v1/audiences/nope", testToken, &e); code != http.StatusNotFound || e.Message != `no audience "nope"` {
		t.Errorf("unknown audience: %d %+v", code, e)
	}
	if code := h.Get(api(svc)+"/v1/audiences/vip/members?cursor=x", testToken, &e); code != http.StatusBadRequest {
		t.Errorf("bad cursor: %d %+v", code, e)
	}
	var p audiences.ProfileView
	if code := h.Get(api(svc)+"/v1/profiles/anon-9", testToken, &p); code != http.StatusOK || p.AnonymousID != "anon-9" || p.UserID != "" || string(p.Traits) != `{"plan":"team"}` {
		t.Errorf("anonymous profile: %d %+v", code, p)
	}
	var a audiences.AudienceView
	if h.Get(api(svc)+"/v1/audiences/vip", testToken, &a); a.Members != n+1 || a.LastSync.Joins != n+1 || a.Partial || a.Total != 3 || a.LastSyncAt == "" {
		t.Errorf("audience: %+v", a)
	}
	seen := map[string]int{}
	cursor, pages := "", 0
	for {
		var page audiences.MembersPage
		if code := h.Get(api(svc)+"/v1/audiences/vip/members?limit=4&cursor="+cursor, testToken, &page); code != http.StatusOK {
			t.Fatalf("members page: %d", code)
		}
		if len(page.Data) > 4 {
			t.Fatalf("page of %d", len(page.Data))
		}
		for _, m := range page.Data {
			seen[m.UserID+m.AnonymousID]++
		}
		pages++
		if page.Next == "" || pages > 50 {
			break
		}
		cursor = page.Next
	}
	if len(seen) != n+1 || seen["free-1"] != 0 || seen["anon-9"] != 1 {
		t.Fatalf("members: %d distinct, %v", len(seen), seen)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("member %s listed %d times", id, c)
		}
	}
}

// TestTwoInstancesRebalance: events stream in while a second instance joins and the first
// leaves; every member is sent true exactly once, every computed value ends right, and
// the profile API of either instance answers for any user (forwarding to the owner).
func TestTwoInstancesRebalance(t *testing.T) { synctest.Test(t, testTwoInstancesRebalance) }

func testTwoInstancesRebalance(t *testing.T) {
	h := newHarness(t, sources+vip+orders)
	// Each instance's id is its API's address, so "http://{instance}" reaches it.
	addrA, addrB := h.addr(), h.addr()
	with := func(addr string) func(*audiences.Config) {
		return func(c *audiences.Config) { c.Addr, c.PeerURL = addr, "http://{instance}" }
	}
	a, _, stopA := h.run(addrA, with(addrA))
	const users, rounds = 40, 6
	var b *audiences.Service
	for r := range rounds {
		for i := range users {
			u := fmt.Sprintf("u%02d", i)
			if i%4 == r%4 {
				h.send(fmt.Sprintf(`{"type":"identify","userId":%q,"traits":{"plan":"pro"}}`, u))
			}
			h.track(u, "Order Completed", `{"revenue":1}`)
		}
		switch r {
		case 1:
			b, _, _ = h.run(addrB, with(addrB))
		case 2:
			// Both run: either answers for every user, forwarding to the owner.
			servicetest.Eventually(t, 20*time.Second, "every profile from either instance", func() string {
				for i := range users {
					var p audiences.ProfileView
					u := fmt.Sprintf("u%02d", i)
					for _, svc := range []*audiences.Service{a, b} {
						if code := h.Get(api(svc)+"/v1/profiles/"+u, testToken, &p); code != http.StatusOK || p.UserID != u {
							return fmt.Sprintf("profile %s from %s: %d", u, svc.Addr(), code)
						}
					}
				}
				return ""
			})
			var view audiences.AudienceView
			if h.Get(api(b)+"/v1/audiences/vip", testToken, &view); view.Partial || view.Partitions != 3 {
				t.Errorf("audience view over two instances: %+v", view)
			}
		case 3:
			stopA()
		}
		h.advance(700 * time.Millisecond)
	}
	// Every user: vip true once, orders_total ending at 6.
	vipTrue := map[string]int{}
	servicetest.Eventually(t, 30*time.Second, "vip true and orders_total 6 for every user", func() string {
		h.events.Poll()
		got := decodeIdentifies(t, h.events.Got)
		last := map[string]any{}
		vipTrue = map[string]int{}
		for _, id := range got {
			if v, ok := id.Traits["vip"]; ok {
				if v != true {
					t.Fatalf("vip %v for %s", v, id.UserID)
				}
				vipTrue[id.UserID]++
			}
			if v, ok := id.Traits["orders_total"]; ok {
				last[id.UserID] = v
			}
		}
		done := len(vipTrue) == users && len(last) == users
		for _, v := range last {
			done = done && v == 6.0
		}
		if !done {
			return fmt.Sprintf("vip true for %d users, orders_total %v", len(vipTrue), last)
		}
		return ""
	})
	for u, n := range vipTrue {
		if n != 1 {
			t.Errorf("%s was sent vip true %d times", u, n)
		}
	}
	var p audiences.ProfileView
	if code := h.Get(api(b)+"/v1/profiles/u03", testToken, &p); code != http.StatusOK || string(p.ComputedTraits["orders_total"]) != "6" {
		t.Fatalf("profile from the remaining instance: %d %+v", code, p)
	}
}

// TestConfigChanges: a changed rule is a new audience (true for every member of the new rule,
// false for those who left); a renamed one sends false under the old key and true under the
// new; a removed one sends false to its members once, then nothing.
func TestConfigChanges(t *testing.T) { synctest.Test(t, testConfigChanges) }

func testConfigChanges(t *testing.T) {
	h := newHarness(t, sources+vip)
	h.run("aud-cfg", nil)
	h.send(`{"type":"identify","userId":"p1","traits":{"plan":"pro"}}`,
		`{"type":"identify","userId":"p2","traits":{"plan":"team"}}`,
		`{"type":"identify","userId":"f1","traits":{"plan":"free"}}`)
	h.identifies(2, 10*time.Second)

	// The rule changes: pro or free. p1 stays (true again: a new audience's first sync), p2
	// leaves, f1 joins.
	h.Apply(sources + `
audiences:
  - id: vip
    name: VIP
    source: engage
    rule: {trait: plan, in: [pro, free]}
`)
	got := byUser(h.identifies(3, 10*time.Second))
	want := map[string]map[string]any{"p1": {"vip": true}, "p2": {"vip": false}, "f1": {"vip": true}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the rule change: %v, want %v", got, want)
	}
	h.quiet(2500 * time.Millisecond)

	// Renamed: false under vip, true under very_important.
	h.Apply(sources + `
audiences:
  - id: vip
    name: Very Important
    source: engage
    rule: {trait: plan, in: [pro, free]}
`)
	got = byUser(h.identifies(4, 10*time.Second))
	want = map[string]map[string]any{"p1": {"vip": false, "very_important": true}, "f1": {"vip": false, "very_important": true}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the rename: %v, want %v", got, want)
	}
	h.quiet(2500 * time.Millisecond)

	// Removed: false once to each member, under the last key.
	if err := platform.DeleteConfigObject(h.Ctx, h.Client, schemas.TopicConfig, schemas.ConfigKindAudience, "vip"); err != nil {
		t.Fatal(err)
	}
	got = byUser(h.identifies(2, 10*time.Second))
	want = map[string]map[string]any{"p1": {"very_important": false}, "f1": {"very_important": false}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the removal: %v, want %v", got, want)
	}
	h.quiet(3 * time.Second)
}

// TestSyncInChunks: a sync with more changes than one transaction may send goes on in the
// next ones, sending each member once.
func TestSyncInChunks(t *testing.T) { synctest.Test(t, testSyncInChunks) }

func testSyncInChunks(t *testing.T) {
	h := newHarness(t, sources+vip)
	for i := range 25 {
		h.send(fmt.Sprintf(`{"type":"identify","userId":"u%d","traits":{"plan":"pro"}}`, i))
	}
	svc, _, _ := h.run("aud-chunks", func(c *audiences.Config) { c.MaxChangesPerTransaction = 2 })
	got := byUser(h.identifies(25, 15*time.Second))
	if len(got) != 25 {
		t.Fatalf("%d users, want 25: %v", len(got), got)
	}
	for u, traits := range got {
		if fmt.Sprint(traits) != "map[vip:true]" {
			t.Errorf("%s: %v", u, traits)
		}
	}
	h.quiet(2500 * time.Millisecond)
	var a audiences.AudienceView
	if h.Get(api(svc)+"/v1/audiences/vip", testToken, &a); a.Members != 25 || a.LastSync.Joins != 0 {
		t.Errorf("after the chunked sync and a quiet one: %+v", a)
	}
}

// TestDeletionForgetsChangelog: a deletion tombstones, on audiences.state, the user's profile
// and every redirect of an anonymous id merged into it, though they live on other partitions;
// a redirect another user keeps stays. A redirect's value holds only the profile it leads to.
// The service's report on tracking.deletions.status counts what went, and is committed after
// the tombstones.
func TestDeletionForgetsChangelog(t *testing.T) { synctest.Test(t, testDeletionForgetsChangelog) }

func testDeletionForgetsChangelog(t *testing.T) {
	h := newHarness(t, sources+vip)
	anon, user := onOtherPartitions(t)
	anon2, kept, other := "anon-second", "anon-kept", "user-other"
	svc, _, _ := h.run("aud-forget", func(c *audiences.Config) { c.SyncInterval = time.Hour })
	h.send(fmt.Sprintf(`{"type":"track","anonymousId":%q,"event":"Viewed"}`, anon),
		fmt.Sprintf(`{"type":"identify","userId":%q,"anonymousId":%q,"traits":{"email":"o@example.com"}}`, other, kept))
	servicetest.Eventually(t, 10*time.Second, "the anonymous id merged into the other user", func() string {
		var p audiences.ProfileView
		if code := h.Get(api(svc)+"/v1/profiles/"+kept, testToken, &p); code != http.StatusOK || p.UserID != other {
			return fmt.Sprintf("%s not merged into %s yet: %d %+v", kept, other, code, p)
		}
		return ""
	})
	h.send(fmt.Sprintf(`{"type":"identify","userId":%q,"anonymousId":%q,"traits":{"email":"u@example.com","phone":"+331234"}}`, user, anon),
		fmt.Sprintf(`{"type":"identify","userId":%q,"anonymousId":%q,"traits":{"plan":"pro"}}`, user, anon2),
		fmt.Sprintf(`{"type":"identify","userId":%q,"anonymousId":%q}`, user, kept))
	servicetest.Eventually(t, 10*time.Second, "three merged ids", func() string {
		var p audiences.ProfileView
		h.Get(api(svc)+"/v1/profiles/"+user, testToken, &p)
		if len(p.MergedIDs) != 3 {
			return fmt.Sprintf("merged ids of %s: %v", user, p.MergedIDs)
		}
		for _, id := range []string{anon, anon2} {
			var q audiences.ProfileView
			if code := h.Get(api(svc)+"/v1/profiles/"+id, testToken, &q); code != http.StatusOK || q.UserID != user {
				return fmt.Sprintf("%s not merged into %s yet: %d %+v", id, user, code, q)
			}
		}
		return ""
	})
	h.Produce(&kgo.Record{Topic: schemas.TopicDeletions, Key: []byte(user),
		Value: fmt.Appendf(nil, `{"userId":%q,"kind":"DELETE_ONLY","requestId":"r-forget"}`, user)})
	status := h.Reader(schemas.TopicDeletionsStatus)
	reps := status.WaitFor(1, 15*time.Second)
	if len(reps) != 1 || string(reps[0].Key) != "r-forget/audiences" {
		t.Fatalf("status records %v, want the audiences report keyed r-forget/audiences", reps)
	}
	rep, _, err := schemas.DecodeDeletionStatusRecord(reps[0].Value)
	want := map[string]int64{schemas.CountProfiles: 1, schemas.CountRedirects: 2, schemas.CountTombstones: 3}
	if err != nil || rep.Store != schemas.StoreAudiences || rep.UserID != user || rep.DoneAt == "" || !maps.Equal(rep.Counts, want) {
		t.Fatalf("report %s (%v), want counts %v", reps[0].Value, err, want)
	}

	// audiences.state read raw, from its start, by a plain consumer.
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(h.Kafka.Brokers...), kgo.ConsumeTopics(schemas.TopicAudiencesState),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted())}, h.KafkaOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	last := map[string][]byte{}
	quiet := 0
	for quiet < 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		if fs.NumRecords() == 0 {
			quiet++
		}
		fs.EachRecord(func(r *kgo.Record) {
			last[string(r.Key)] = r.Value
			var v map[string]any
			if r.Value != nil && json.Unmarshal(r.Value, &v) == nil && v["mergedInto"] != nil {
				if len(v) != 1 {
					t.Errorf("redirect %s = %s: holds more than the profile it leads to", r.Key, r.Value)
				}
			}
		})
	}
	for _, k := range []string{user, anon, anon2} {
		if v, ok := last[k]; !ok || v != nil {
			t.Errorf("audiences.state %s: last record %q (found %v), want a tombstone", k, v, ok)
		}
	}
	if v := string(last[kept]); v != fmt.Sprintf(`{"mergedInto":%q}`, other) {
		t.Errorf("audiences.state %s = %s: the redirect %s keeps must stay", kept, v, other)
	}
	// The anonymous id's next message starts a profile of its own.
	h.send(fmt.Sprintf(`{"type":"track","anonymousId":%q,"event":"Viewed"}`, anon))
	servicetest.Eventually(t, 10*time.Second, "the anonymous id's own profile after the deletion", func() string {
		var p audiences.ProfileView
		if code := h.Get(api(svc)+"/v1/profiles/"+anon, testToken, &p); code != http.StatusOK || p.UserID != "" || p.AnonymousID != anon {
			return fmt.Sprintf("profile of %s after the deletion: %d %+v", anon, code, p)
		}
		if code := h.Get(api(svc)+"/v1/profiles/"+user, testToken, nil); code != http.StatusNotFound {
			return fmt.Sprintf("profile of %s after the deletion: %d", user, code)
		}
		return ""
	})
}

// TestDeletionForgetsOldRedirects: an id merged longer ago than the last 16 a profile
// remembers is still a redirect after the deletion; its next message reaches the deleted
// profile's partition, is handed back, and starts a profile of the id's own instead of
// rebuilding the deleted user's.
func TestDeletionForgetsOldRedirects(t *testing.T) { synctest.Test(t, testDeletionForgetsOldRedirects) }

func testDeletionForgetsOldRedirects(t *testing.T) {
	h := newHarness(t, sources+vip)
	svc, _, _ := h.run("aud-old-redirects", func(c *audiences.Config) { c.SyncInterval = time.Hour })
	const user = "user-many"
	var msgs []string
	for i := range 17 {
		msgs = append(msgs, fmt.Sprintf(`{"type":"identify","userId":%q,"anonymousId":"old-%d","traits":{"email":"m@example.com"}}`, user, i))
	}
	h.send(msgs...)
	servicetest.Eventually(t, 10*time.Second, "the merge of old-0", func() string {
		var p audiences.ProfileView
		if code := h.Get(api(svc)+"/v1/profiles/old-0", testToken, &p); code != http.StatusOK || p.UserID != user {
			return fmt.Sprintf("old-0 not merged yet: %d %+v", code, p)
		}
		if h.Get(api(svc)+"/v1/profiles/"+user, testToken, &p); len(p.MergedIDs) != 16 || slices.Contains(p.MergedIDs, "old-0") {
			return fmt.Sprintf("merged ids: %v", p.MergedIDs)
		}
		return ""
	})
	h.Produce(&kgo.Record{Topic: schemas.TopicDeletions, Key: []byte(user),
		Value: fmt.Appendf(nil, `{"userId":%q,"kind":"DELETE_ONLY","requestId":"r-old"}`, user)})
	reps := h.Reader(schemas.TopicDeletionsStatus).WaitFor(1, 15*time.Second)
	if rep, _, err := schemas.DecodeDeletionStatusRecord(reps[0].Value); err != nil || rep.Counts[schemas.CountRedirects] != 16 {
		t.Fatalf("report %s: want 16 redirects", reps[0].Value)
	}
	h.send(`{"type":"track","anonymousId":"old-0","event":"Viewed"}`)
	servicetest.Eventually(t, 10*time.Second, "old-0's own profile", func() string {
		var p audiences.ProfileView
		if code := h.Get(api(svc)+"/v1/profiles/old-0", testToken, &p); code != http.StatusOK || p.UserID != "" || p.AnonymousID != "old-0" {
			return fmt.Sprintf("profile of old-0: %d %+v", code, p)
		}
		return ""
	})
	if code := h.Get(api(svc)+"/v1/profiles/"+user, testToken, nil); code != http.StatusNotFound {
		t.Fatalf("the deleted user's profile came back: %d", code)
	}
}
