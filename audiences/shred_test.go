package audiences_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/audiences"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/platform/shred"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestSealedProfiles: with SHRED_EVENTS on, audiences opens sealed tracking.events records,
// and seals what it writes of the user — every profile version on audiences.state and its
// identify calls — with the user's key: nothing of the user is in clear. A restart restores
// the profile; once the user's key is shredded, a restart skips the profile's versions
// (counted) and the profile is gone.
func TestSealedProfiles(t *testing.T) { synctest.Test(t, testSealedProfiles) }

func testSealedProfiles(t *testing.T) {
	h := newHarness(t, sources+vip)
	h.Kafka.ShredEvents = true
	keys := h.Keyring()
	const email = "planted.jane@example.com"
	ev := servicetest.EventRecord(t, "web", `{"type":"identify","userId":"jane","traits":{"plan":"pro","email":"`+email+`"}}`)
	h.Seal(keys, ev)
	h.Produce(ev)
	svc, _, stop := h.run("aud-shred", nil)
	var identify *kgo.Record
	deadline := time.Now().Add(15 * time.Second)
	for identify == nil && time.Now().Before(deadline) {
		h.events.Poll()
		for _, r := range h.events.Got {
			if servicetest.Header(r, audiences.HeaderOrigin) == audiences.OriginAudiences {
				identify = r
			}
		}
	}
	if identify == nil {
		t.Fatal("no identify call")
	}
	if !bytes.Equal(shred.KeyOf(identify), shred.KeyOf(ev)) {
		t.Fatalf("the identify call is not sealed with jane's key: %v", identify.Headers)
	}
	if plain, err := keys.Open(identify); err != nil || !bytes.Contains(plain, []byte(`"vip":true`)) {
		t.Fatalf("identify opens to %q, %v", plain, err)
	}
	state := h.Reader(schemas.TopicAudiencesState)
	var versions int
	servicetest.Eventually(t, 10*time.Second, "the sealed versions of the profile on audiences.state", func() string {
		state.Poll()
		versions = 0
		for _, r := range state.Got {
			// jane's versions, and the entry of her email, sealed with her key too
			// (docs/audiences.md#identity-resolution).
			if string(r.Key) == "jane" || bytes.HasPrefix(r.Key, []byte("\x1femail:")) {
				versions++
				if shred.KeyOf(r) == nil || bytes.Contains(r.Value, []byte(email)) {
					return fmt.Sprintf("a profile version in clear: %q", r.Value)
				}
			}
		}
		if versions == 0 {
			return "no profile version of jane"
		}
		return ""
	})
	var p audiences.ProfileView
	if code := h.Get(api(svc)+"/v1/profiles/jane", testToken, &p); code != http.StatusOK || !bytes.Contains(p.Traits, []byte(email)) {
		t.Fatalf("profile: %d %+v", code, p)
	}
	stop()
	// A restart restores the sealed profile.
	svc, _, stop = h.run("aud-shred", nil)
	servicetest.Eventually(t, 10*time.Second, "the profile restored after a restart", func() string {
		if code := h.Get(api(svc)+"/v1/profiles/jane", testToken, &p); code != http.StatusOK {
			return fmt.Sprintf("profile after a restart: %d", code)
		}
		return ""
	})
	stop()
	if n, err := keys.Shred(h.Ctx, "jane"); err != nil || n != 1 {
		t.Fatalf("Shred = %d, %v", n, err)
	}
	svc, reg, _ := h.run("aud-shred", nil)
	servicetest.Eventually(t, 10*time.Second, "the restore that skips the shredded versions", func() string {
		if n := servicetest.Counter(t, reg, "tributary_audiences_restores_total"); n < 1 {
			return "not restored yet"
		}
		if n := servicetest.Counter(t, reg, "tributary_audiences_shredded_records_total", "topic", schemas.TopicAudiencesState); n != float64(versions) {
			return fmt.Sprintf("%v shredded versions skipped, want %d", n, versions)
		}
		if code := h.Get(api(svc)+"/v1/profiles/jane", testToken, nil); code != http.StatusNotFound {
			return fmt.Sprintf("the shredded profile: %d, want 404", code)
		}
		return ""
	})
}

// opened returns recs with their values opened (sealed ones copied).
func opened(t *testing.T, keys *shred.Keyring, recs []*kgo.Record) []*kgo.Record {
	t.Helper()
	out := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		v, err := keys.Open(r)
		if err != nil {
			t.Fatalf("opening %s offset %d: %v", r.Topic, r.Offset, err)
		}
		c := *r
		c.Value = v
		out[i] = &c
	}
	return out
}
