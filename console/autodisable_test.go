package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestUIOverviewAutoDisableProblems (docs/console.md#the-web-ui): a destination.failing notice
// of tributary.notices is a problem on the overview until its disable time; an auto-disabled
// destination (tributary.config) is one too, saying its messages are parked.
func TestUIOverviewAutoDisableProblems(t *testing.T) {
	h := newHarness(t, nil)
	b := h.signIn(t)
	off := false
	hooks := schemas.DestinationSettings{Webhooks: []schemas.Webhook{{URL: "https://h.example.com/in"}},
		AutoDisable: &schemas.AutoDisable{After: schemas.Duration(72 * time.Hour)}}
	failing := schemas.Destination{ID: "crm", Type: schemas.DestinationTypeWebhooks, Sources: []string{"web"}, Settings: hooks}
	disabled := schemas.Destination{ID: "billing", Type: schemas.DestinationTypeWebhooks, Sources: []string{"web"}, Settings: hooks, Enabled: &off,
		AutoDisabled: &schemas.AutoDisabled{At: "2026-11-27T10:00:00.000Z", FailingSince: "2026-11-24T10:00:00.000Z", After: schemas.Duration(72 * time.Hour)}}
	var recs []schemas.ConfigRecord
	for _, d := range []schemas.Destination{failing, disabled} {
		rec, err := d.Record()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if err := platform.ProduceConfigRecords(h.env.Ctx, h.env.Client, schemas.TopicConfig, recs...); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	since := schemas.FormatTimestamp(now.Add(-36 * time.Hour))
	n := schemas.Notice{ID: "crm/" + since + "/50", Type: schemas.NoticeDestinationFailing, DestinationID: "crm", Percent: 50, FailingSince: since,
		After: "72h", DisableAt: schemas.FormatTimestamp(now.Add(36 * time.Hour)), At: schemas.FormatTimestamp(now)}
	h.env.Produce(&kgo.Record{Topic: schemas.TopicNotices, Key: []byte("crm"), Value: n.Record()})
	servicetest.Eventually(t, 10*time.Second, "the auto-disable problems on the overview", func() bool {
		p := b.get("/")
		return strings.Contains(p.Body, `<a href="/destinations/billing">Destination billing was auto-disabled at 2026-11-27T10:00:00.000Z: every attempt failed for 72h since 2026-11-24T10:00:00.000Z. Its messages are parked until it is enabled again.</a>`) &&
			strings.Contains(p.Body, `<a href="/destinations/crm">Destination crm has failed every attempt since `+since+` (50 % of its auto-disable budget of 72h): it is disabled at `+n.DisableAt+` unless a message is delivered before.</a>`)
	})
	b.get("/destinations/billing").contains(t, http.StatusOK, `<span class="badge warn">auto-disabled</span>`,
		"This destination was auto-disabled at 2026-11-27T10:00:00.000Z: every attempt failed for 72h since 2026-11-24T10:00:00.000Z. Its messages are parked, not dropped")
}

// TestAPIEnableClearsAutoDisabled (docs/delivery.md#auto-disable): the API shows an
// auto-disabled destination's state; a PATCH that enables it clears the state (a patch of the
// state itself is ignored).
func TestAPIEnableClearsAutoDisabled(t *testing.T) {
	h := newHarness(t, nil)
	off := false
	d := schemas.Destination{ID: "crm", Type: schemas.DestinationTypeWebhooks, Sources: []string{"web"}, Enabled: &off,
		Settings:     schemas.DestinationSettings{Webhooks: []schemas.Webhook{{URL: "https://h.example.com/in"}}, AutoDisable: &schemas.AutoDisable{After: schemas.Duration(time.Hour)}},
		AutoDisabled: &schemas.AutoDisabled{At: "2026-11-27T10:00:00.000Z", FailingSince: "2026-11-27T09:00:00.000Z", After: schemas.Duration(time.Hour)}}
	rec, err := d.Record()
	if err != nil {
		t.Fatal(err)
	}
	if err := platform.ProduceConfigRecords(h.env.Ctx, h.env.Client, schemas.TopicConfig, rec); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	servicetest.Eventually(t, 5*time.Second, "the auto-disabled destination in the API", func() bool {
		r := h.do(http.MethodGet, "/v1/destinations/crm", nil)
		if r.Status != http.StatusOK {
			return false
		}
		got = r.Data(t)
		return got["autoDisabled"] != nil
	})
	if a, _ := got["autoDisabled"].(map[string]any); a["failingSince"] != "2026-11-27T09:00:00.000Z" || a["after"] != "1h" {
		t.Fatalf("autoDisabled = %v", got["autoDisabled"])
	}
	if st, _ := got["settings"].(map[string]any); st["autoDisable"] == nil {
		t.Fatalf("settings = %v, want autoDisable", got["settings"])
	}
	r := h.do(http.MethodPatch, "/v1/destinations/crm", map[string]any{"enabled": true, "autoDisabled": map[string]any{"at": "x"}})
	expect(t, r, http.StatusOK)
	if after := r.Data(t); after["enabled"] != true || after["autoDisabled"] != nil {
		t.Fatalf("after enabling: enabled %v, autoDisabled %v", after["enabled"], after["autoDisabled"])
	}
}
