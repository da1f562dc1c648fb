package schemas_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestAutoDisableSetting (docs/configuration.md#destination): settings.autoDisable.after parses
// as a duration of at least a second; anything else is an error naming the field.
func TestAutoDisableSetting(t *testing.T) {
	const base = "sources: [{id: web, writeKey: wk}]\ndestinations:\n  - {id: crm, type: webhooks, sources: [web], settings: {webhooks: [{url: \"https://h.example.com\"}]%s}}\n"
	cfg, err := schemas.ParseConfig([]byte(strings.Replace(base, "%s", ", autoDisable: {after: 72h}", 1)), "yaml")
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Destinations[0].Settings.AutoDisable; a == nil || time.Duration(a.After) != 72*time.Hour {
		t.Fatalf("autoDisable = %+v, want after 72h", a)
	}
	if cfg, err := schemas.ParseConfig([]byte(strings.Replace(base, "%s", "", 1)), "yaml"); err != nil || cfg.Destinations[0].Settings.AutoDisable != nil {
		t.Fatalf("without autoDisable: %v, %+v; want it off", err, cfg)
	}
	for _, bad := range []string{", autoDisable: {after: 500ms}", ", autoDisable: {after: 0s}", ", autoDisable: {}", ", autoDisable: {after: soon}"} {
		cfg, err := schemas.ParseConfig([]byte(strings.Replace(base, "%s", bad, 1)), "yaml")
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), "autoDisable") && !strings.Contains(err.Error(), "duration") {
			t.Errorf("%s: error %v, want one naming autoDisable.after", bad, err)
		}
	}
}

// TestAutoDisabledClearedWhenEnabled: a destination written enabled again (the console's
// PATCH keeps the other fields) is no longer auto-disabled; written disabled, it keeps the
// state, and the router still routes it.
func TestAutoDisabledClearedWhenEnabled(t *testing.T) {
	off, on := false, true
	d := schemas.Destination{ID: "crm", Type: schemas.DestinationTypeWebhooks, Sources: []string{"web"}, Enabled: &off,
		Settings:     schemas.DestinationSettings{Webhooks: []schemas.Webhook{{URL: "https://h.example.com"}}},
		AutoDisabled: &schemas.AutoDisabled{At: "2026-11-27T10:00:00.000Z", FailingSince: "2026-11-24T10:00:00.000Z", After: schemas.Duration(72 * time.Hour)}}
	if !d.IsAutoDisabled() || !d.Routed() {
		t.Fatalf("auto-disabled: IsAutoDisabled %v, Routed %v", d.IsAutoDisabled(), d.Routed())
	}
	decode := func(d schemas.Destination) schemas.Destination {
		rec, err := d.Record()
		if err != nil {
			t.Fatal(err)
		}
		var got schemas.Destination
		if err := json.Unmarshal(rec.Value, &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := decode(d); got.AutoDisabled == nil || got.AutoDisabled.FailingSince != d.AutoDisabled.FailingSince {
		t.Errorf("written disabled: autoDisabled %+v, want it kept", got.AutoDisabled)
	}
	d.Enabled = &on
	if got := decode(d); got.AutoDisabled != nil || !got.IsEnabled() {
		t.Errorf("written enabled: autoDisabled %+v, want none", got.AutoDisabled)
	}
	d.Enabled, d.AutoDisabled = &off, nil
	if d.Routed() {
		t.Error("disabled by an operator: routed, want not")
	}
}
