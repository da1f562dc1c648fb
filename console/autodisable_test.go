package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// TestUIOverviewAutoDisableProblems (docs/console.md#overview): a destination.failing notice
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
}
