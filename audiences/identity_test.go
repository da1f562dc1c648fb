package audiences_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/audiences"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// identityEvents renders a profile's merge history for comparisons: "kind rule type:id".
func identityEvents(p audiences.ProfileView) []string {
	var out []string
	for _, e := range p.Identity {
		out = append(out, strings.Join(slices.DeleteFunc([]string{e.Kind, e.Rule, e.Type + ":" + e.ID}, func(s string) bool { return s == "" }), " "))
	}
	return out
}

func externalIDList(p audiences.ProfileView) []string {
	var out []string
	for _, e := range p.ExternalIDs {
		out = append(out, e.Type+":"+e.ID)
	}
	slices.Sort(out)
	return out
}

// TestIdentityResolution is the table of merge scenarios of docs/audiences.md#identity-resolution:
// which profiles external ids link, which ids the rules refuse, and what is recorded where. The
// two profiles of each scenario live on different partitions.
func TestIdentityResolution(t *testing.T) {
	ctx := func(email, extType, extID string) string {
		var parts []string
		if email != "" {
			parts = append(parts, fmt.Sprintf(`"traits":{"email":%q}`, email))
		}
		if extID != "" {
			parts = append(parts, fmt.Sprintf(`"externalIds":[{"id":%q,"type":%q,"collection":"users","encoding":"none"}]`, extID, extType))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	type want struct {
		// merged: the second profile answers as the first (its id among the first's merged ids).
		merged bool
		// first, second: the merge history of each (kind rule type:id), in order.
		first, second []string
		// firstIDs: the first profile's external ids, sorted.
		firstIDs []string
		refusals map[string]float64
		merges   float64
	}
	for _, tc := range []struct {
		name string
		mod  func(*audiences.Config)
		// first and second are the messages of the two profiles (%s: the profile's id).
		first, second []string
		third         []string // a third profile's messages, after the second's
		userIDs       bool     // the profiles are identified (userId), else anonymous
		want          want
	}{{
		name:   "an email links two anonymous profiles",
		first:  []string{`{"type":"identify","anonymousId":%q,"traits":{"email":"ann@example.com"}}`},
		second: []string{`{"type":"track","anonymousId":%q,"event":"Viewed","context":` + ctx("ann@example.com", "", "") + `}`},
		want: want{merged: true, first: []string{"merge email:ann@example.com"}, firstIDs: []string{"email:ann@example.com"},
			merges: 1},
	}, {
		name:   "a custom external id links two anonymous profiles",
		mod:    func(c *audiences.Config) { c.IdentityLimits = "user_id:1,*:5,ios.idfv:5" },
		first:  []string{`{"type":"track","anonymousId":%q,"event":"Opened","context":` + ctx("", "ios.idfv", "D-1") + `}`},
		second: []string{`{"type":"track","anonymousId":%q,"event":"Opened","context":` + ctx("", "ios.idfv", "D-1") + `}`},
		want:   want{merged: true, first: []string{"merge ios.idfv:D-1"}, firstIDs: []string{"ios.idfv:D-1"}, merges: 1},
	}, {
		name:   "a blocked value never merges",
		first:  []string{`{"type":"identify","anonymousId":%q,"traits":{"email":"null"}}`},
		second: []string{`{"type":"identify","anonymousId":%q,"traits":{"email":"null"}}`},
		want: want{first: []string{"refusal blocked email:null"}, second: []string{"refusal blocked email:null"},
			refusals: map[string]float64{"blocked": 2}},
	}, {
		name:    "the limit refuses the second user_id and records why on both",
		userIDs: true,
		first:   []string{`{"type":"identify","userId":%q,"traits":{"email":"shared@example.com"}}`},
		second:  []string{`{"type":"identify","userId":%q,"traits":{"email":"shared@example.com"}}`},
		want: want{first: []string{"refusal limit email:shared@example.com"}, second: []string{"refusal limit email:shared@example.com"},
			firstIDs: []string{"email:shared@example.com"}, refusals: map[string]float64{"limit": 1}},
	}, {
		name: "a limit refuses an id over it on the profile",
		mod:  func(c *audiences.Config) { c.IdentityLimits = "user_id:1,email:1" },
		first: []string{`{"type":"identify","anonymousId":%q,"traits":{"email":"one@example.com"}}`,
			`{"type":"identify","anonymousId":%q,"traits":{"email":"two@example.com"}}`},
		second: []string{`{"type":"track","anonymousId":%q,"event":"Viewed"}`},
		want: want{first: []string{"refusal limit email:two@example.com"}, firstIDs: []string{"email:one@example.com"},
			refusals: map[string]float64{"limit": 1}},
	}, {
		name: "priority: a higher-priority id merges and the lower-priority email over its limit is dropped",
		mod: func(c *audiences.Config) {
			c.IdentityLimits, c.IdentityPriority = "user_id:1,email:1", []string{"user_id", "ios.idfv", "email"}
		},
		first:  []string{`{"type":"identify","anonymousId":%q,"traits":{"email":"a@example.com"},"context":` + ctx("", "ios.idfv", "D-2") + `}`},
		second: []string{`{"type":"identify","anonymousId":%q,"traits":{"email":"b@example.com"},"context":` + ctx("", "ios.idfv", "D-2") + `}`},
		want: want{merged: true, first: []string{"refusal limit email:b@example.com", "merge ios.idfv:D-2"},
			firstIDs: []string{"email:a@example.com", "ios.idfv:D-2"}, refusals: map[string]float64{"limit": 1}, merges: 1},
	}, {
		name: "priority: a lower-priority id that would put the profile over a limit is refused",
		mod: func(c *audiences.Config) {
			c.IdentityLimits, c.IdentityPriority = "user_id:1,email:1", []string{"user_id", "email", "ios.idfv"}
		},
		first:  []string{`{"type":"identify","anonymousId":%q,"traits":{"email":"a@example.com"},"context":` + ctx("", "ios.idfv", "D-3") + `}`},
		second: []string{`{"type":"identify","anonymousId":%q,"traits":{"email":"b@example.com"},"context":` + ctx("", "ios.idfv", "D-3") + `}`},
		want: want{first: []string{"refusal limit ios.idfv:D-3"}, second: []string{"refusal limit ios.idfv:D-3"},
			firstIDs: []string{"email:a@example.com", "ios.idfv:D-3"}, refusals: map[string]float64{"limit": 1}},
	}, {
		name:   "maxMerges refuses a merge beyond it",
		mod:    func(c *audiences.Config) { c.IdentityMaxMerges = 1 },
		first:  []string{`{"type":"identify","anonymousId":%q,"traits":{"email":"m@example.com"}}`},
		second: []string{`{"type":"identify","anonymousId":%q,"traits":{"email":"m@example.com"}}`},
		third:  []string{`{"type":"identify","anonymousId":%q,"traits":{"email":"m@example.com"}}`},
		want: want{merged: true, first: []string{"merge email:m@example.com", "refusal maxMerges email:m@example.com"},
			firstIDs: []string{"email:m@example.com"}, refusals: map[string]float64{"maxMerges": 1}, merges: 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, sources)
				first, second := onOtherPartitions(t)
				idField := "anonymousId"
				if tc.userIDs {
					first, second = "user-a", "user-b"
					idField = "userId"
				}
				svc, reg, _ := h.run("aud-identity", func(c *audiences.Config) {
					c.SyncInterval = time.Hour
					if tc.mod != nil {
						tc.mod(c)
					}
				})
				for _, m := range tc.first {
					h.send(fmt.Sprintf(strings.Replace(m, `"anonymousId"`, `"`+idField+`"`, 1), first))
				}
				h.advance(2 * time.Second)
				for _, m := range tc.second {
					h.send(fmt.Sprintf(strings.Replace(m, `"anonymousId"`, `"`+idField+`"`, 1), second))
				}
				h.advance(5 * time.Second)
				for _, m := range tc.third {
					h.send(fmt.Sprintf(m, "third-profile"))
				}
				h.advance(5 * time.Second)
				var p1, p2 audiences.ProfileView
				if code := h.Get(api(svc)+"/v1/profiles/"+first, testToken, &p1); code != http.StatusOK {
					t.Fatalf("profile of %s: %d", first, code)
				}
				if code := h.Get(api(svc)+"/v1/profiles/"+second, testToken, &p2); code != http.StatusOK {
					t.Fatalf("profile of %s: %d", second, code)
				}
				merged := slices.Contains(p1.MergedIDs, second) && p2.AnonymousID == p1.AnonymousID && p2.UserID == p1.UserID
				if merged != tc.want.merged {
					t.Fatalf("merged %v, want %v: %+v / %+v", merged, tc.want.merged, p1, p2)
				}
				if got := identityEvents(p1); !slices.Equal(got, tc.want.first) {
					t.Errorf("history of the first profile: %q, want %q", got, tc.want.first)
				}
				if !tc.want.merged {
					if got := identityEvents(p2); !slices.Equal(got, tc.want.second) {
						t.Errorf("history of the second profile: %q, want %q", got, tc.want.second)
					}
				}
				if got := externalIDList(p1); !slices.Equal(got, tc.want.firstIDs) {
					t.Errorf("external ids of the first profile: %q, want %q", got, tc.want.firstIDs)
				}
				for _, e := range p1.Identity {
					if e.At == "" || (e.Kind == "refusal" && e.Detail == "") {
						t.Errorf("a recorded event lacks its time or its reason: %+v", e)
					}
				}
				for _, rule := range []string{"blocked", "limit", "maxMerges", "taken"} {
					if got := servicetest.Counter(t, reg, "tributary_audiences_identity_refusals_total", "rule", rule); got != tc.want.refusals[rule] {
						t.Errorf("refusals{rule=%s}: %v, want %v", rule, got, tc.want.refusals[rule])
					}
				}
				if got := servicetest.Counter(t, reg, "tributary_audiences_identity_merges_total"); got != tc.want.merges {
					t.Errorf("merges: %v, want %v", got, tc.want.merges)
				}
			})
		})
	}
}

// TestIdentityProfileAPIs: a profile is found by its email and custom ids in Segment's
// Profile API, whose external_ids lists them, and /v1/profiles shows them with the merge
// history; all of it survives a restart (restored from audiences.state).
func TestIdentityProfileAPIs(t *testing.T) { synctest.Test(t, testIdentityProfileAPIs) }

func testIdentityProfileAPIs(t *testing.T) {
	h := newHarness(t, sources)
	anon, other := onOtherPartitions(t)
	svc, _, stop := h.run("aud-identity-api", func(c *audiences.Config) { c.SyncInterval = time.Hour })
	h.send(fmt.Sprintf(`{"type":"identify","anonymousId":%q,"traits":{"email":"zoe@example.com","plan":"pro"},"context":{"externalIds":[{"id":"idfa-9","type":"ios.idfa","collection":"users","encoding":"none"}]}}`, anon))
	h.advance(2 * time.Second)
	h.send(fmt.Sprintf(`{"type":"page","anonymousId":%q,"context":{"traits":{"email":"zoe@example.com"}}}`, other))
	h.advance(5 * time.Second)
	check := func(svc *audiences.Service) {
		t.Helper()
		code, a := segmentGet(h, svc, "email:zoe@example.com/traits")
		if code != http.StatusOK || string(a.Traits["plan"]) != `"pro"` {
			t.Fatalf("traits by email: %d %+v", code, a)
		}
		code, a = segmentGet(h, svc, "ios.idfa:idfa-9/external_ids")
		var ids []string
		for _, d := range a.Data {
			ids = append(ids, fmt.Sprint(d["type"], ":", d["id"]))
		}
		slices.Sort(ids)
		want := []string{"anonymous_id:" + anon, "anonymous_id:" + other, "email:zoe@example.com", "ios.idfa:idfa-9"}
		if code != http.StatusOK || !slices.Equal(ids, want) {
			t.Fatalf("external_ids by ios.idfa: %d %v, want %v", code, ids, want)
		}
		if code, a := segmentGet(h, svc, "email:nobody@example.com/traits"); code != http.StatusNotFound || a.Error.Code != "not_found" {
			t.Fatalf("an unknown email: %d %+v", code, a)
		}
		var p audiences.ProfileView
		if code := h.Get(api(svc)+"/v1/profiles/"+other, testToken, &p); code != http.StatusOK || p.AnonymousID != anon {
			t.Fatalf("profile of %s: %d %+v", other, code, p)
		}
		if got := identityEvents(p); !slices.Equal(got, []string{"merge email:zoe@example.com"}) || p.Identity[0].Other != other {
			t.Fatalf("merge history: %q %+v", got, p.Identity)
		}
	}
	check(svc)
	stop()
	svc, _, _ = h.run("aud-identity-api", func(c *audiences.Config) { c.SyncInterval = time.Hour })
	h.advance(3 * time.Second)
	check(svc)
}

// TestIdentityAfterDeletion: an email claimed by an anonymous profile that was merged into a
// user who was then deleted is claimed again by the next profile that carries it, not left
// leading to the deleted profile.
func TestIdentityAfterDeletion(t *testing.T) { synctest.Test(t, testIdentityAfterDeletion) }

func testIdentityAfterDeletion(t *testing.T) {
	h := newHarness(t, sources)
	anon, user := onOtherPartitions(t)
	svc, reg, _ := h.run("aud-identity-deleted", func(c *audiences.Config) { c.SyncInterval = time.Hour })
	h.send(fmt.Sprintf(`{"type":"identify","anonymousId":%q,"traits":{"email":"gone@example.com"}}`, anon))
	h.advance(2 * time.Second)
	h.send(fmt.Sprintf(`{"type":"identify","userId":%q,"anonymousId":%q}`, user, anon))
	h.advance(3 * time.Second)
	if code, a := segmentGet(h, svc, "email:gone@example.com/metadata"); code != http.StatusOK {
		t.Fatalf("the user by email before the deletion: %d %+v", code, a)
	}
	h.deletion(user, "DELETE_ONLY")
	h.advance(3 * time.Second)
	if code, _ := segmentGet(h, svc, "email:gone@example.com/traits"); code != http.StatusNotFound {
		t.Fatalf("the deleted user by email: %d, want 404", code)
	}
	h.send(`{"type":"identify","anonymousId":"newcomer","traits":{"email":"gone@example.com","plan":"new"}}`)
	h.advance(5 * time.Second)
	code, a := segmentGet(h, svc, "email:gone@example.com/traits")
	if code != http.StatusOK || string(a.Traits["plan"]) != `"new"` {
		t.Fatalf("the email after the deletion: %d %+v, want the newcomer's profile", code, a)
	}
	if got := servicetest.Counter(t, reg, "tributary_audiences_identity_merges_total"); got != 1 {
		t.Fatalf("merges: %v, want 1 (the anonymous profile into the user)", got)
	}
}

// TestIdentityLimitWindow: ids linked longer ago than AUDIENCES_IDENTITY_WINDOW do not count
// towards the limits; within it, they do.
func TestIdentityLimitWindow(t *testing.T) { synctest.Test(t, testIdentityLimitWindow) }

func testIdentityLimitWindow(t *testing.T) {
	h := newHarness(t, sources)
	svc, _, _ := h.run("aud-identity-window", func(c *audiences.Config) {
		c.SyncInterval, c.IdentityLimits, c.IdentityWindow = time.Hour, "user_id:1,email:1", 10*time.Minute
	})
	email := func(e string) {
		h.send(fmt.Sprintf(`{"type":"identify","anonymousId":"w1","traits":{"email":%q}}`, e))
		h.advance(2 * time.Second)
	}
	email("first@example.com")
	email("second@example.com") // within the window: over the limit
	h.advance(11 * time.Minute)
	email("third@example.com") // the first is older than the window: allowed
	var p audiences.ProfileView
	if code := h.Get(api(svc)+"/v1/profiles/w1", testToken, &p); code != http.StatusOK {
		t.Fatalf("profile: %d", code)
	}
	if got, want := externalIDList(p), []string{"email:first@example.com", "email:third@example.com"}; !slices.Equal(got, want) {
		t.Fatalf("external ids %q, want %q", got, want)
	}
	if got, want := identityEvents(p), []string{"refusal limit email:second@example.com"}; !slices.Equal(got, want) {
		t.Fatalf("history %q, want %q", got, want)
	}
}

// TestIdentityClaimInPlace: an external id whose entry lives on its profile's own partition is
// claimed in the profile's transaction, without a link hand-off; another profile carrying it
// later still joins the first (docs/audiences.md#identity-resolution).
func TestIdentityClaimInPlace(t *testing.T) { synctest.Test(t, testIdentityClaimInPlace) }

func testIdentityClaimInPlace(t *testing.T) {
	part := kgo.StickyKeyPartitioner(nil).ForTopic(schemas.TopicEvents)
	of := func(id string) int { return part.Partition(&kgo.Record{Key: []byte(id)}, 3) }
	var first, second, email string
	for i := 0; email == "" && i < 1000; i++ {
		e := fmt.Sprintf("in-place-%d@example.com", i)
		if a, b := fmt.Sprintf("anon-%d", i), fmt.Sprintf("other-%d", i); of(a) == of(audiences.ExtKey("email", e)) && of(b) != of(a) {
			first, second, email = a, b, e
		}
	}
	if email == "" {
		t.Fatal("no email on its profile's partition")
	}
	h := newHarness(t, sources)
	svc, reg, _ := h.run("aud-identity-in-place", func(c *audiences.Config) { c.SyncInterval = time.Hour })
	h.send(fmt.Sprintf(`{"type":"identify","anonymousId":%q,"traits":{"email":%q}}`, first, email))
	h.advance(2 * time.Second)
	h.send(fmt.Sprintf(`{"type":"track","anonymousId":%q,"event":"Viewed","context":{"traits":{"email":%q}}}`, second, email))
	h.advance(5 * time.Second)
	var p audiences.ProfileView
	if code := h.Get(api(svc)+"/v1/profiles/"+first, testToken, &p); code != http.StatusOK || !slices.Contains(p.MergedIDs, second) {
		t.Fatalf("profile of %s: %d %+v, want %s merged into it", first, code, p, second)
	}
	if got, want := identityEvents(p), []string{"merge email:" + email}; !slices.Equal(got, want) {
		t.Fatalf("history %q, want %q", got, want)
	}
	if got := servicetest.Counter(t, reg, "tributary_audiences_identity_merges_total"); got != 1 {
		t.Fatalf("merges: %v, want 1", got)
	}
	// One link hand-off: the second profile's (its partition is not the email's); the first
	// profile claimed the email in place.
	r := h.Reader(schemas.TopicAudiencesRepartition)
	r.Settle = time.Second
	var links []string
	for _, rec := range r.WaitFor(1, 5*time.Second) {
		if strings.HasPrefix(string(rec.Value), `{"op":"link"`) {
			links = append(links, string(rec.Value))
		}
	}
	if len(links) != 1 || !strings.Contains(links[0], `"into":"`+second+`"`) {
		t.Fatalf("link hand-offs %q, want only the second profile's", links)
	}
}

// TestIdentityLinksBatched: the new emails of one poll are handed to their partitions in a few
// links records, not one record each, and every one of them is claimed: each email finds its
// profile.
func TestIdentityLinksBatched(t *testing.T) { synctest.Test(t, testIdentityLinksBatched) }

func testIdentityLinksBatched(t *testing.T) {
	h := newHarness(t, sources)
	const n = 30
	for i := range n { // sent before the service starts: read in one poll
		h.send(fmt.Sprintf(`{"type":"identify","anonymousId":"batched-%d","traits":{"email":"batched-%d@example.com","n":%d}}`, i, i, i))
	}
	svc, _, _ := h.run("aud-identity-batched", func(c *audiences.Config) { c.SyncInterval = time.Hour })
	h.advance(5 * time.Second)
	for i := range n {
		if code, a := segmentGet(h, svc, fmt.Sprintf("email:batched-%d@example.com/traits", i)); code != http.StatusOK || string(a.Traits["n"]) != fmt.Sprint(i) {
			t.Fatalf("email %d: %d %+v", i, code, a)
		}
	}
	r := h.Reader(schemas.TopicAudiencesRepartition)
	r.Settle = time.Second
	records, links := 0, 0
	for _, rec := range r.WaitFor(1, 5*time.Second) {
		switch v := string(rec.Value); {
		case strings.HasPrefix(v, `{"op":"links"`):
			records++
			links += strings.Count(v, `{"op":"link",`)
		case strings.HasPrefix(v, `{"op":"link"`):
			records++
			links++
		}
	}
	// About a third of the emails are on their profile's own partition: claimed in place.
	if links < n/6 || links > n || records > 6 {
		t.Fatalf("%d links in %d records, want up to %d links in at most 6 records (2 other partitions)", links, records, n)
	}
}

// TestIdentityRulesFromTheConfig: the config's identity section overrides the
// AUDIENCES_IDENTITY_* settings from the next message on, a refusal names the config's field,
// and without the section the settings hold again (docs/audiences.md#identity-rules).
func TestIdentityRulesFromTheConfig(t *testing.T) { synctest.Test(t, testIdentityRulesFromTheConfig) }

func testIdentityRulesFromTheConfig(t *testing.T) {
	h := newHarness(t, sources)
	svc, reg, _ := h.run("aud-identity-config", func(c *audiences.Config) {
		c.SyncInterval, c.IdentityLimits = time.Hour, "user_id:1,email:3"
	})
	email := func(user, e string) {
		h.send(fmt.Sprintf(`{"type":"identify","anonymousId":%q,"traits":{"email":%q}}`, user, e))
		h.advance(2 * time.Second)
	}
	profile := func(user string) audiences.ProfileView {
		t.Helper()
		var p audiences.ProfileView
		if code := h.Get(api(svc)+"/v1/profiles/"+user, testToken, &p); code != http.StatusOK {
			t.Fatalf("profile of %s: %d", user, code)
		}
		return p
	}
	email("c1", "one@example.com")
	email("c1", "two@example.com") // the setting's limit is 3
	h.Apply(sources + `
identity:
  blocked: ['(?i)^bot-']
  limits: {user_id: 1, email: 2}
`)
	h.advance(2 * time.Second)
	email("c1", "three@example.com") // the config's limit is 2: refused
	email("c2", "bot-7@example.com") // the config's blocked expression
	email("c3", "null")              // the settings' blocked words no longer apply: linked
	if got, want := externalIDList(profile("c1")), []string{"email:one@example.com", "email:two@example.com"}; !slices.Equal(got, want) {
		t.Fatalf("c1's external ids %q, want %q", got, want)
	}
	if got, want := identityEvents(profile("c1")), []string{"refusal limit email:three@example.com"}; !slices.Equal(got, want) {
		t.Fatalf("c1's history %q, want %q", got, want)
	}
	c2 := profile("c2")
	if len(c2.Identity) != 1 || c2.Identity[0].Rule != "blocked" || !strings.Contains(c2.Identity[0].Detail, "identity.blocked of the config") {
		t.Fatalf("c2's history %+v, want one refusal by the config's blocked rule, named", c2.Identity)
	}
	if got, want := externalIDList(profile("c3")), []string{"email:null"}; !slices.Equal(got, want) {
		t.Fatalf("c3's external ids %q, want %q (blocked: the config's list replaces the setting)", got, want)
	}
	// The section removed (its tombstone, as a config file's apply writes): the settings again.
	if err := platform.DeleteConfigObject(h.Ctx, h.Client, schemas.TopicConfig, schemas.ConfigKindIdentity, schemas.IdentityRulesID); err != nil {
		t.Fatal(err)
	}
	h.advance(2 * time.Second)
	email("c4", "four@example.com")
	email("c4", "five@example.com")
	email("c4", "six@example.com") // the setting's limit of 3 again
	email("c5", "null")            // the setting's blocked words again
	if got, want := externalIDList(profile("c4")), []string{"email:five@example.com", "email:four@example.com", "email:six@example.com"}; !slices.Equal(got, want) {
		t.Fatalf("c4's external ids %q, want %q", got, want)
	}
	c5 := profile("c5")
	if len(c5.Identity) != 1 || !strings.Contains(c5.Identity[0].Detail, "AUDIENCES_IDENTITY_BLOCKED") {
		t.Fatalf("c5's history %+v, want one refusal by AUDIENCES_IDENTITY_BLOCKED", c5.Identity)
	}
	if got := servicetest.Counter(t, reg, "tributary_audiences_identity_refusals_total", "rule", "blocked"); got != 2 {
		t.Errorf("blocked refusals: %v, want 2", got)
	}
}
