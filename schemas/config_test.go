package schemas

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// withoutLines returns a copy of c without its line table, for comparing configs.
func withoutLines(c *Config) Config {
	out := *c
	out.lines = nil
	return out
}

func TestLoadConfigFileGood(t *testing.T) {
	files, err := filepath.Glob("testdata/config/good_*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no good config files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if _, err := LoadConfigFile(f); err != nil {
				t.Fatalf("LoadConfigFile: %v", err)
			}
		})
	}
}

func TestParseConfigFull(t *testing.T) {
	cfg, err := LoadConfigFile("testdata/config/good_full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	enabled, disabled := true, false
	want := Config{
		Sources: []Source{
			{ID: "web", Name: "Web site", WriteKey: "wk_live_123", TrackingPlan: &TrackingPlan{BlockedEvents: []string{"Debug Event"}}},
			{ID: "engage", Name: "Engage", WriteKeyHash: "sha256:2216a555ea0741a46077210ab9f78daf79cd21581e11da7520edcff5380e6d63"},
		},
		Destinations: []Destination{
			{
				ID: "order-hooks", Type: "webhooks", Name: "Order hooks", Enabled: &enabled, Sources: []string{"web", "engage"},
				Settings: DestinationSettings{
					Webhooks: []Webhook{
						{URL: "https://hooks.example.com/segment", Headers: map[string]string{"X-Team": "growth"}},
						{URL: "http://backup.example.com:8080/in?src=tributary"},
					},
					SharedSecret: "s3cret", StandardWebhooks: true, PreviousSharedSecret: "old", MaxRequestsPerSecond: 50, MaxConcurrency: 20,
				},
			},
			{
				ID: "paused", Type: "webhooks", Enabled: &disabled,
				Settings: DestinationSettings{Webhooks: []Webhook{{URL: "https://paused.example.com/"}}},
			},
		},
		Audiences: []Audience{
			{ID: "power-users", Name: "Power Users", Source: "engage", Rule: Rule{All: []Condition{
				{Event: "Order Completed", AtLeast: 3, Within: Duration(720 * time.Hour)},
				{Trait: "plan", Comparison: Comparison{Equals: "pro"}},
			}}},
			{ID: "top-buyers", Name: "Top 10 Buyers", Source: "engage", Rule: Rule{Any: []Condition{
				{Event: "Order Completed"},
				{Trait: "lifetimeValue", Comparison: Comparison{Equals: float64(1000)}},
				{Trait: "vip", Comparison: Comparison{Equals: true}},
			}}},
		},
	}
	if got := withoutLines(cfg); !reflect.DeepEqual(got, want) {
		t.Errorf("good_full.yaml parsed as\n%+v\nwant\n%+v", got, want)
	}

	// The JSON form of the same config parses to the same value.
	fromJSON, err := LoadConfigFile("testdata/config/good_full.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := withoutLines(fromJSON); !reflect.DeepEqual(got, want) {
		t.Errorf("good_full.json parsed as\n%+v\nwant\n%+v", got, want)
	}

	if !cfg.Destinations[0].IsEnabled() || cfg.Destinations[1].IsEnabled() {
		t.Errorf("IsEnabled: got %v, %v; want true, false", cfg.Destinations[0].IsEnabled(), cfg.Destinations[1].IsEnabled())
	}
	if got := cfg.Audiences[1].Rule.Any[0].MinCount(); got != 1 {
		t.Errorf("MinCount of an event condition without atLeast = %d, want 1", got)
	}
	if got := cfg.Audiences[0].TraitKey(); got != "power_users" {
		t.Errorf("TraitKey = %q, want power_users", got)
	}
}

func TestParseConfigAnchors(t *testing.T) {
	cfg, err := LoadConfigFile("testdata/config/good_anchors.yaml")
	if err != nil {
		t.Fatal(err)
	}
	hooks := cfg.Destinations[0].Settings.Webhooks
	want := map[string]string{"X-Team": "growth", "X-Env": "prod"}
	for i, h := range hooks {
		if !reflect.DeepEqual(h.Headers, want) {
			t.Errorf("webhooks[%d].headers = %v, want %v", i, h.Headers, want)
		}
	}
}

// TestLoadConfigFileBad holds one file per parse or validation error, with the exact
// message(s) LoadConfigFile returns, one per line.
func TestLoadConfigFileBad(t *testing.T) {
	tests := []badConfigFile{
		// Parsing: YAML.
		{"bad_unknown_field.yaml", `3: sources[0]: unknown field "writekey" (did you mean "writeKey"?)`},
		{"bad_unknown_top_field.yaml", `1: unknown field "source" (did you mean "sources"?)`},
		{"bad_unknown_nested_field.yaml", `11: destinations[0].settings.webhooks[0]: unknown field "secret"`},
		{"bad_repeated_field.yaml", `3: sources[0].id: repeated field (first at line 2)`},
		{"bad_repeated_header.yaml", `13: destinations[0].settings.webhooks[0].headers["X-Team"]: repeated key (first at line 12)`},
		{"bad_sources_not_list.yaml", `2: sources: want a list, got a mapping`},
		{"bad_top_level_list.yaml", `1: the document must be a mapping of fields, got a list`},
		{"bad_enabled_type.yaml", `7: destinations[0].enabled: want true or false, got a string "yes"`},
		{"bad_rate_type.yaml", `11: destinations[0].settings.maxRequestsPerSecond: want a number, got a string "fast"`},
		{"bad_at_least_type.yaml", `11: audiences[0].rule.all[0].atLeast: want an integer, got a number "2.5"`},
		{"bad_duration.yaml", `11: audiences[0].rule.all[0].within: invalid duration "30 days": use a number with a unit such as "720h"`},
		{"bad_duration_number.yaml", `11: audiences[0].rule.all[0].within: want a duration string such as "720h", got a number "30"`},
		{"bad_equals_type.yaml", `11: audiences[0].rule.all[0].equals: want a string, number or boolean, got a list`},
		{"bad_syntax.yaml", `1: invalid YAML: did not find expected '-' indicator`},
		{"bad_two_documents.yaml", `4: a second YAML document: a config file holds exactly one`},
		{"bad_empty.yaml", ` the config is empty: want a mapping with sources, destinations and audiences`},
		// Parsing: JSON.
		{"bad_unknown_field.json", `3: sources[0]: unknown field "writekey" (did you mean "writeKey"?)`},
		{"bad_repeated_field.json", `3: sources[0].id: repeated field (first at line 3)`},
		{"bad_string_type.json", `3: sources[0].name: want a string, got a number "5"`},
		{"bad_syntax.json", `3: invalid JSON: invalid character '}' looking for beginning of object key string`},
		{"bad_trailing.json", `2: unexpected content after the JSON object`},
		{"bad_top_level_array.json", `1: the document must be a mapping of fields, got a list`},
		{"bad_missing_source.json", `7: destinations[0].sources[0]: unknown source "mobile"`},
		// Validation: sources.
		{"bad_id_missing.yaml", `2: sources[0].id: is required`},
		{"bad_id_format.yaml", `2: sources[0].id: "Web Site" must contain only a-z, 0-9, '-' and '_'`},
		{"bad_duplicate_source_id.yaml", `4: sources[1].id: duplicate id "web" (first used by sources[0])`},
		{"bad_no_write_key.yaml", `2: sources[0]: one of writeKey or writeKeyHash is required`},
		{"bad_both_write_keys.yaml", `4: sources[0].writeKeyHash: give writeKey or writeKeyHash, not both`},
		{"bad_write_key_hash.yaml", `3: sources[0].writeKeyHash: must be "sha256:" followed by 64 lower-case hex digits`},
		{"bad_write_key_chars.yaml", `3: sources[0].writeKey: must be printable ASCII without spaces or ':'`},
		{"bad_duplicate_write_key.yaml", `5: sources[1].writeKeyHash: same write key as sources[0]`},
		{"bad_blocked_event_empty.yaml", `5: sources[0].trackingPlan.blockedEvents[1]: must not be empty`},
		// Validation: destinations.
		{"bad_duplicate_destination_id.yaml", `11: destinations[1].id: duplicate id "hooks" (first used by destinations[0])`},
		{"bad_destination_type.yaml", `6: destinations[0].type: must be "webhooks", got "webhook"`},
		{"bad_no_webhooks.yaml", `8: destinations[0].settings.webhooks: at least 1 webhook is required`},
		{"bad_too_many_webhooks.yaml", `15: destinations[0].settings.webhooks[5]: at most 5 webhooks are allowed, got 6`},
		{"bad_url_missing.yaml", `10: destinations[0].settings.webhooks[0].url: is required`},
		{"bad_url_scheme.yaml", `10: destinations[0].settings.webhooks[0].url: must be an absolute http or https URL with a host, got "ftp://hooks.example.com/segment"`},
		{"bad_url_relative.yaml", `10: destinations[0].settings.webhooks[0].url: must be an absolute http or https URL with a host, got "hooks.example.com/segment"`},
		{"bad_url_no_host.yaml", `10: destinations[0].settings.webhooks[0].url: must be an absolute http or https URL with a host, got "https:///segment"`},
		{"bad_url_password.yaml", `10: destinations[0].settings.webhooks[0].url: must be an absolute http or https URL with a host, got "gopher://xxxxx:xxxxx@hooks.example.com/"`},
		{"bad_header_name.yaml", `12: destinations[0].settings.webhooks[0].headers["X Team"]: is not a valid HTTP header name`},
		{"bad_header_reserved.yaml", `12: destinations[0].settings.webhooks[0].headers["content-type"]: is set by Tributary on every request and cannot be configured` + "\n" +
			`13: destinations[0].settings.webhooks[0].headers["X-Signature"]: is set by Tributary on every request and cannot be configured`},
		{"bad_header_value.yaml", `12: destinations[0].settings.webhooks[0].headers["X-Token"]: value must not contain control characters such as CR or LF`},
		{"bad_header_too_many.yaml", `11: destinations[0].settings.webhooks[0].headers: at most 20 headers are allowed, got 21`},
		{"bad_header_name_too_long.yaml", `12: destinations[0].settings.webhooks[0].headers["X-` + strings.Repeat("n", 255) + `"]: is 257 bytes long: a header name may have at most 256`},
		{"bad_header_value_too_long.yaml", `12: destinations[0].settings.webhooks[0].headers["X-Token"]: value is 8193 bytes long: a header value may have at most 8192`},
		{"bad_url_too_long.yaml", `10: destinations[0].settings.webhooks[0].url: is 8236 bytes long: a webhook URL may have at most 8192`},
		{"bad_header_case_repeat.yaml", `13: destinations[0].settings.webhooks[0].headers["x-team"]: repeats header "X-Team" (header names ignore case)`},
		{"bad_missing_source.yaml", `7: destinations[0].sources[1]: unknown source "mobile"`},
		{"bad_destination_source_twice.yaml", `7: destinations[0].sources[1]: source "web" is listed twice`},
		{"bad_standard_webhooks_without_secret.yaml", `11: destinations[0].settings.standardWebhooks: requires sharedSecret`},
		{"bad_previous_secret_without_secret.yaml", `11: destinations[0].settings.previousSharedSecret: requires sharedSecret`},
		// Validation: the console's user list.
		{"bad_console_user_unknown_field.yaml", `5: console.users[0]: unknown field "admin"`},
		{"bad_console_user_role.yaml", `4: console.users[0].role: "owner" is not a role: admin, editor or viewer`},
		{"bad_console_user_email.yaml", `3: console.users[0].email: "Ana <ana@example.com>" is not an email address (name@example.com)` + "\n" +
			`5: console.users[1].email: "bob" is not an email address (name@example.com)`},
		{"bad_console_user_twice.yaml", `5: console.users[1].email: "Ana@Example.com" is listed twice (first at console.users[0])`},
		{"bad_secret_encrypted.yaml", `12: destinations[0].settings.webhooks[0].headers["Authorization"]: value must not start with "enc:v1:", which marks an encrypted value in tributary.config (give the secret in clear: it is encrypted where it rests when CONFIG_ENCRYPTION_KEY is set)` + "\n" +
			`13: destinations[0].settings.sharedSecret: must not start with "enc:v1:", which marks an encrypted value in tributary.config (give the secret in clear: it is encrypted where it rests when CONFIG_ENCRYPTION_KEY is set)` + "\n" +
			`14: destinations[0].settings.previousSharedSecret: must not start with "enc:v1:", which marks an encrypted value in tributary.config (give the secret in clear: it is encrypted where it rests when CONFIG_ENCRYPTION_KEY is set)`},
		{"bad_rate_negative.yaml", `11: destinations[0].settings.maxRequestsPerSecond: must be a number ≥ 0 (0: no limit), got -1`},
		{"bad_concurrency_negative.yaml", `11: destinations[0].settings.maxConcurrency: must be a whole number ≥ 0 (0: the adaptive limit alone), got -5`},
		{"bad_ordering.yaml", `11: destinations[0].settings.ordering: must be "perUser" or omitted (no ordering), got "perSource"`},
		{"bad_concurrency_type.yaml", `11: destinations[0].settings.maxConcurrency: want an integer, got a number "2.5"`},
		{"bad_rate_infinite.yaml", `11: destinations[0].settings.maxRequestsPerSecond: must be a number ≥ 0 (0: no limit), got +Inf`},
		// Validation: audiences.
		{"bad_duplicate_audience_id.yaml", `12: audiences[1].id: duplicate id "power-users" (first used by audiences[0])`},
		{"bad_audience_name_missing.yaml", `6: audiences[0].name: is required`},
		{"bad_audience_name_no_letters.yaml", `6: audiences[0].name: "!!! ---" has no letters or digits, so it has no trait key`},
		{"bad_audience_name_collision.yaml", `13: audiences[1].name: "power-users!" has the trait key "power_users", as has audiences[0].name "Power Users"`},
		{"bad_audience_source_missing.yaml", `7: audiences[0].source: unknown source "engage"`},
		{"bad_audience_no_source.yaml", `5: audiences[0].source: is required`},
		{"bad_audience_no_conditions.yaml", `8: audiences[0].rule: needs one of all, any, not, event, trait, computedTrait or audience`},
		{"bad_condition_both.yaml", `10: audiences[0].rule.all[0]: has both event and trait: a condition is exactly one of all, any, not, event, trait, computedTrait or audience`},
		{"bad_condition_neither.yaml", `10: audiences[0].rule.any[0]: needs one of all, any, not, event, trait, computedTrait or audience`},
		{"bad_condition_at_least_zero.yaml", `11: audiences[0].rule.all[0].atLeast: must be at least 1, got 0`},
		{"bad_condition_at_least_negative.yaml", `11: audiences[0].rule.all[0].atLeast: must be at least 1, got -2`},
		{"bad_condition_within_negative.yaml", `11: audiences[0].rule.all[0].within: must not be negative, got -24h`},
		{"bad_condition_event_with_equals.yaml", `11: audiences[0].rule.all[0].equals: applies to trait and computedTrait conditions only, not to an event condition`},
		{"bad_condition_trait_without_equals.yaml", `10: audiences[0].rule.all[0]: needs an operator for the trait condition: equals, notEquals, exists, in, contains, gt, gte, lt or lte`},
		{"bad_condition_trait_with_event_fields.yaml", `12: audiences[0].rule.all[0].atLeast: applies to event conditions only` + "\n" +
			`13: audiences[0].rule.all[0].within: applies to event conditions only`},
		// Every problem at once, in line order.
		{"bad_many_errors.yaml", strings.Join([]string{
			`2: sources[0].id: "Web" must contain only a-z, 0-9, '-' and '_'`,
			`2: sources[0]: one of writeKey or writeKeyHash is required`,
			`8: destinations[0].sources[0]: unknown source "mobile"`,
			`11: destinations[0].settings.webhooks[0].url: must be an absolute http or https URL with a host, got "/relative"`,
			`12: destinations[0].settings.standardWebhooks: requires sharedSecret`,
			`17: audiences[0].rule: needs one of all, any, not, event, trait, computedTrait or audience`,
		}, "\n")},
	}
	checkBadConfigFiles(t, "testdata/config", tests)
}

// badConfigFile is one bad_* file of a testdata folder and the error LoadConfigFile must
// give for it, without the "<file>:" that starts every line.
type badConfigFile struct {
	file string
	want string
}

// checkBadConfigFiles loads every case's file of dir and compares the error, line by line;
// every bad_* file of dir must have a case.
func checkBadConfigFiles(t *testing.T, dir string, tests []badConfigFile) {
	t.Helper()
	seen := map[string]bool{}
	for _, tt := range tests {
		seen[tt.file] = true
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join(dir, tt.file)
			cfg, err := LoadConfigFile(path)
			if err == nil {
				t.Fatalf("LoadConfigFile accepted %s: %+v", tt.file, cfg)
			}
			// Every line of the message starts with "<file>:"; the cases hold the rest.
			var want []string
			for _, l := range strings.Split(tt.want, "\n") {
				want = append(want, path+":"+l)
			}
			if got := err.Error(); got != strings.Join(want, "\n") {
				t.Errorf("error:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
			}
			var errs ConfigErrors
			if !errors.As(err, &errs) || len(errs) != len(want) {
				t.Errorf("errors.As(ConfigErrors) = %v with %d entries, want %d", errs, len(errs), len(want))
			}
		})
	}
	files, _ := filepath.Glob(filepath.Join(dir, "bad_*"))
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("%s has no test case", f)
		}
	}
}

func TestConfigErrorFormat(t *testing.T) {
	tests := []struct {
		name string
		err  ConfigError
		want string
	}{
		{"everything", ConfigError{File: "a.yaml", Line: 3, Path: "sources[0]", Message: "m"}, "a.yaml:3: sources[0]: m"},
		{"no file", ConfigError{Line: 7, Path: "sources[0]", Message: `unknown field "writekey"`}, `line 7: sources[0]: unknown field "writekey"`},
		{"no line", ConfigError{Path: "sources[0].id", Message: "is required"}, "sources[0].id: is required"},
		{"file without line", ConfigError{File: "a.yaml", Message: "m"}, "a.yaml: m"},
		{"message only", ConfigError{Message: "m"}, "m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseConfigInline(t *testing.T) {
	deep := strings.Repeat("[", 100) + strings.Repeat("]", 100)
	// 1000 aliases of a source with 2000 blocked events: 2 million values once expanded,
	// from 7 KB of text.
	bomb := "sources:\n  - &s {id: web, trackingPlan: {blockedEvents: &e [" +
		strings.Repeat("a, ", 1999) + "a]}}\n" + strings.Repeat("  - *s\n", 1000)
	tests := []struct {
		name   string
		format string
		data   string
		want   string
	}{
		{"unknown format", "toml", "", `unknown config format "toml": want "yaml" or "json"`},
		{"empty JSON", "json", " \n", "the config is empty: want an object with sources, destinations and audiences"},
		{"truncated JSON", "json", "{\n\"sources\": [", "line 2: invalid JSON: unexpected end of input"},
		{"JSON nested too deep", "json", `{"sources": ` + deep + `}`, "line 1: invalid JSON: nested more than 64 levels deep"},
		{"JSON null document", "json", "null", "line 1: the document must be a mapping of fields, got null"},
		{"JSON bool into string", "json", `{"sources": [{"id": true}]}`, `line 1: sources[0].id: want a string, got a boolean "true"`},
		{"JSON fraction into integer", "json", `{"audiences": [{"rule": {"all": [{"atLeast": 2.0}]}}]}`,
			`line 1: audiences[0].rule.all[0].atLeast: want an integer, got a number "2.0"`},
		{"JSON field names are case-sensitive", "json", `{"Sources": []}`, `line 1: unknown field "Sources" (did you mean "sources"?)`},
		{"YAML NaN equals", "yaml", "audiences: [{id: a, name: A, source: web, rule: {all: [{trait: x, equals: .nan}]}}]\nsources: [{id: web, writeKey: k}]",
			"line 1: audiences[0].rule.all[0].equals: must be a string, a finite number or a boolean, got NaN"},
		{"YAML scalar document", "yaml", "hello\n", `line 1: the document must be a mapping of fields, got a string`},
		{"YAML non-string key", "yaml", "sources:\n  - ? [a]\n    : b\n", `line 2: sources[0]: keys must be strings, got a list`},
		{"YAML custom tag", "yaml", "sources:\n  - id: !secret web\n", `line 2: sources[0].id: want a string, got a value tagged !secret "web"`},
		{"YAML merge key", "yaml", "sources:\n  - <<: {id: web}\n", `line 2: sources[0]: unknown field "<<"`},
		{"YAML alias bomb", "yaml", bomb, ""},
		{"YAML invalid UTF-8", "yaml", "sources:\n  - id: \"\xff\"\n", `invalid YAML: invalid leading UTF-8 octet`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tt.data), tt.format)
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil {
				t.Fatalf("ParseConfig and Validate accepted it: %+v", cfg)
			}
			got := err.Error()
			if tt.name == "YAML alias bomb" {
				if !strings.HasSuffix(got, "the config has more than 200000 values (aliases expanded)") {
					t.Errorf("error %q does not report the value limit", got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("error:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestParseConfigJSONByteOrderMark(t *testing.T) {
	if _, err := ParseConfig([]byte("\ufeff{\"sources\": []}"), "json"); err != nil {
		t.Errorf("ParseConfig of JSON with a byte order mark: %v", err)
	}
}

func TestParseConfigYAMLScalarsAsStrings(t *testing.T) {
	// Plain YAML scalars that look like numbers or booleans are taken as written in string
	// fields; numbers in equals become float64.
	cfg, err := ParseConfig([]byte(`
sources:
  - id: "007"
    name: 2024-01-01
    writeKey: 12345
audiences:
  - id: a
    name: true
    source: "007"
    rule:
      all:
        - trait: score
          equals: 0x10
`), "yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s := cfg.Sources[0]
	if s.ID != "007" || s.Name != "2024-01-01" || s.WriteKey != "12345" {
		t.Errorf("source = %+v", s)
	}
	if a := cfg.Audiences[0]; a.Name != "true" || a.Rule.All[0].Equals != float64(16) {
		t.Errorf("audience = %+v", a)
	}
}

func TestValidateBuiltInCode(t *testing.T) {
	// A config built in code has no lines: errors carry the path only.
	cfg := &Config{
		Sources: []Source{{ID: "web", WriteKey: "wk"}},
		Audiences: []Audience{{ID: "a", Name: "A", Source: "web", Rule: Rule{All: []Condition{
			{Event: "Signed Up", AtLeast: 0},                   // 0 means the default, 1
			{Trait: "age", Comparison: Comparison{Equals: 30}}, // any integer kind is accepted
			{Trait: "tags", Comparison: Comparison{Equals: []string{"x"}}},
		}}}},
	}
	want := "audiences[0].rule.all[2].equals: must be a string, a finite number or a boolean, got []string"
	if err := cfg.Validate(); err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %s", err, want)
	}
}

func TestObjectValidate(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"source", (&Source{ID: "web"}).Validate(), "one of writeKey or writeKeyHash is required"},
		{"destination", (&Destination{ID: "d", Type: "webhooks", Settings: DestinationSettings{Webhooks: []Webhook{{URL: "https://x.example"}}, MaxRequestsPerSecond: -2}}).Validate(),
			"settings.maxRequestsPerSecond: must be a number ≥ 0 (0: no limit), got -2"},
		{"audience", (&Audience{ID: "a", Name: "A", Source: "unknown-is-fine-here", Rule: Rule{Any: []Condition{{Trait: "t"}}}}).Validate(),
			"rule.any[0]: needs an operator for the trait condition: equals, notEquals, exists, in, contains, gt, gte, lt or lte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil || tt.err.Error() != tt.want {
				t.Errorf("Validate() = %v, want %s", tt.err, tt.want)
			}
		})
	}
}

func TestLoadConfigFileExtension(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte("sources = []"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfigFile(path)
	want := "loading config " + path + `: unknown extension ".toml": want .yaml, .yml or .json`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
	// .yml is YAML too; a missing file is an error that says which.
	yml := filepath.Join(dir, "c.yml")
	if err := os.WriteFile(yml, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfigFile(yml); err != nil {
		t.Errorf("LoadConfigFile(.yml) = %v", err)
	}
	if _, err := LoadConfigFile(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: error = %v, want one wrapping os.ErrNotExist", err)
	}
}

func TestDevConfig(t *testing.T) {
	cfg, err := LoadConfigFile("../deploy/config/dev.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Sources) != 1 || cfg.Sources[0].ID != "web" || cfg.Sources[0].WriteKey != "wk_dev_web" || cfg.Sources[0].Name != "Web site" {
		t.Errorf("sources = %+v, want web with writeKey wk_dev_web", cfg.Sources)
	}
	if len(cfg.Destinations) != 1 {
		t.Fatalf("destinations = %+v, want demo-hooks only", cfg.Destinations)
	}
	d := cfg.Destinations[0]
	if d.ID != "demo-hooks" || !d.IsEnabled() || !reflect.DeepEqual(d.Sources, []string{"web"}) ||
		len(d.Settings.Webhooks) != 1 || d.Settings.Webhooks[0].URL != "http://127.0.0.1:9000/webhook" ||
		d.Settings.SharedSecret != "dev-secret" {
		t.Errorf("destination = %+v", d)
	}
}
