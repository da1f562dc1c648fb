package schemas

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestLoadConfigFileBadFilters: every rule of a destination's filters is checked, and the
// error says where: the file line, the destination and the filter, and the FQL column.
func TestLoadConfigFileBadFilters(t *testing.T) {
	checkBadConfigFiles(t, "testdata/config_filters", []badConfigFile{
		{"bad_filters.yaml", strings.Join([]string{
			`15: destinations[0].filters[0].if: filter "big-orders" of destination "hooks": column 49: expected a field, a value, '(' or '!', got the end`,
			`17: destinations[0].filters[1].name: duplicate filter name "big-orders" (first used by destinations[0].filters[0])`,
			`17: destinations[0].filters[1].percent: is required for a sample filter: the share of messages kept, 0 to 100`,
			`20: destinations[0].filters[2].name: is required`,
			`21: destinations[0].filters[2].action: must be one of sample, drop, dropProperties, allowProperties, got "dropEverything"`,
			`22: destinations[0].filters[2].percent: is only for a sample filter`,
			`23: destinations[0].filters[3].properties: at least 1 field path is required for dropProperties`,
			`25: destinations[0].filters[3].sources[0]: "ios" is not one of the destination's sources`,
			`28: destinations[0].filters[4].properties[1]: "userId": allowProperties lists fields of properties, traits or context (e.g. properties.total)`,
			`28: destinations[0].filters[4].properties[2]: filter "only-total" of destination "hooks": "properties..x" is not a field path: column 12: expected a field name after '.'`,
			`29: destinations[0].filters[5].if: is required for a drop filter (it would drop every message)`,
			`31: destinations[0].filters[5].properties: is only for dropProperties and allowProperties`,
			`35: destinations[0].filters[6].percent: must be a number from 0 to 100, got 150`,
		}, "\n")},
	})
}

// TestFiltersRoundTrip: filters load from YAML, validate, and survive the JSON of a config
// record unchanged.
func TestFiltersRoundTrip(t *testing.T) {
	cfg, err := LoadConfigFile("testdata/config_filters/good_filters.yaml")
	if err != nil {
		t.Fatal(err)
	}
	fs := cfg.Destinations[0].Filters
	if len(fs) != 4 || fs[1].Percent == nil || *fs[1].Percent != 10 || fs[2].Sources[0] != "ios" || fs[3].Properties[1] != "properties.currency" {
		t.Fatalf("filters %+v", fs)
	}
	b, err := json.Marshal(cfg.Destinations[0])
	if err != nil {
		t.Fatal(err)
	}
	var back Destination
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Filters, fs) {
		t.Fatalf("round trip: %+v, want %+v", back.Filters, fs)
	}
	if err := back.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestFiltersJSON: filters read from a JSON config as from YAML, an unknown field of a filter
// is refused with its line, and a bad condition's error has the line of its "if".
func TestFiltersJSON(t *testing.T) {
	const head = `{"sources": [{"id": "web", "writeKey": "wk_test_web"}],
 "destinations": [{"id": "hooks", "type": "webhooks", "sources": ["web"],
  "settings": {"webhooks": [{"url": "https://hooks.example.com/segment"}]},
  "filters": [
`
	cfg, err := ParseConfig([]byte(head+`   {"name": "big", "if": "properties.total > 100", "action": "sample", "percent": 12.5}]}]}`), ConfigFormatJSON)
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil || *cfg.Destinations[0].Filters[0].Percent != 12.5 {
		t.Fatalf("%+v, %v", cfg, err)
	}
	_, err = ParseConfig([]byte(head+`   {"name": "big", "iff": "x", "action": "drop"}]}]}`), ConfigFormatJSON)
	if err == nil || !strings.Contains(err.Error(), `line 5: destinations[0].filters[0]: unknown field "iff"`) {
		t.Fatalf("unknown field: %v", err)
	}
	cfg, err = ParseConfig([]byte(head+`   {"name": "big",
    "if": "event = 'A' or",
    "action": "drop"}]}]}`), ConfigFormatJSON)
	if err == nil {
		err = cfg.Validate()
	}
	if err == nil || err.Error() != `line 6: destinations[0].filters[0].if: filter "big" of destination "hooks": column 15: expected a field, a value, '(' or '!', got the end` {
		t.Fatalf("bad condition: %v", err)
	}
}
