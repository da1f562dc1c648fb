package console

import (
	"slices"
	"testing"

	"github.com/tributary-cdp/tributary/console/internal/views"
	"github.com/tributary-cdp/tributary/schemas"
)

func rate(v float64) *float64 { return &v }

// TestJudgeByMessages: a destination is failing when its messages are not delivered — under
// 95 % of those it finished with delivered, or more waiting for a retry than delivered — never
// for its failed attempts alone.
func TestJudgeByMessages(t *testing.T) {
	for _, c := range []struct {
		name    string
		h       views.HealthStats
		failing bool
		why     string
	}{
		{"nothing", views.HealthStats{}, false, ""},
		{"all delivered, half the attempts failed", views.HealthStats{Messages: views.MessageCounts{Delivered: 20}, DeliveryRate: rate(1),
			URLs: []views.URLStats{{URL: "a", Attempts: 20, Successes: 20}, {URL: "b", Attempts: 20, Failures: map[string]uint64{"connection": 20}}}}, false, ""},
		{"dead letters", views.HealthStats{Messages: views.MessageCounts{Delivered: 3, DeadLettered: 2}, DeliveryRate: rate(0.6)}, true,
			"60.0 % of its messages were delivered in the last hour (3 delivered, 2 dead-lettered)"},
		{"waiting", views.HealthStats{Messages: views.MessageCounts{Delivered: 1, Retrying: 5}}, true,
			"5 messages wait for a retry and 1 was delivered in the last hour"},
		{"a few waiting", views.HealthStats{Messages: views.MessageCounts{Delivered: 100, Retrying: 5}, DeliveryRate: rate(1)}, false, ""},
	} {
		failing, why := judge(c.h, "1h")
		if failing != c.failing || why != c.why {
			t.Errorf("%s: %v %q, want %v %q", c.name, failing, why, c.failing, c.why)
		}
	}
}

// TestURLProblems: a URL under 95 % of successful attempts is named by its place in the
// destination's webhooks and what it does most, with how the messages were delivered all the
// same; a URL the destination no longer has is "a former URL"; a healthy URL is no problem.
func TestURLProblems(t *testing.T) {
	d := &schemas.Destination{ID: "flaky", Settings: schemas.DestinationSettings{Webhooks: []schemas.Webhook{
		{URL: "https://one.example.com/in"}, {URL: "https://two.example.com/in?token=s3cret"}}}}
	two := schemas.RedactURL(d.Settings.Webhooks[1].URL)
	h := views.HealthStats{Messages: views.MessageCounts{Delivered: 20}, URLs: []views.URLStats{
		{URL: "https://one.example.com/in", Attempts: 20, Successes: 20},
		{URL: two, Attempts: 20, Failures: map[string]uint64{"connection": 18, "timeout": 2}},
		{URL: "https://old.example.com/in", Attempts: 4, Successes: 1, Failures: map[string]uint64{"status_5xx": 3}},
	}}
	var got []string
	for _, p := range urlProblems(d, h, "1h") {
		if p.Href != "/destinations/flaky#urls" {
			t.Errorf("href %q", p.Href)
		}
		got = append(got, p.Text)
	}
	want := []string{
		"URL 2 of flaky refuses connections: 20 of its 20 attempts failed in the last hour; its messages were delivered by another URL.",
		"A former URL of flaky answers 5xx: 3 of its 4 attempts failed in the last hour; its messages were delivered by another URL.",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems %q, want %q", got, want)
	}
	// One URL, its failures retried until delivered.
	single := &schemas.Destination{ID: "solo", Settings: schemas.DestinationSettings{Webhooks: d.Settings.Webhooks[:1]}}
	h = views.HealthStats{Messages: views.MessageCounts{Delivered: 10}, DeliveredAfterRetries: 2, URLs: []views.URLStats{
		{URL: "https://one.example.com/in", Attempts: 12, Successes: 10, Failures: map[string]uint64{"timeout": 2}}}}
	if p := urlProblems(single, h, "24h"); len(p) != 1 || p[0].Text != "URL 1 of solo times out: 2 of its 12 attempts failed in the last 24 hours; its messages were delivered after retries." {
		t.Errorf("one URL: %+v", p)
	}
}
