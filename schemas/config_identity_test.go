package schemas

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestIdentityRulesParse: the identity section of a config file, YAML and JSON, with its
// limits mapping (id types and the window), and its record on tributary.config read back.
func TestIdentityRulesParse(t *testing.T) {
	yamlText := `sources: [{id: web, writeKey: wk}]
identity:
  blocked: ['^[0-]*$', '(?i)^(null|anonymous)$', '@example\.invalid$']
  limits: {user_id: 1, email: 2, "*": 5, window: 720h}
  priority: [user_id, email, ios.idfa]
  maxMerges: 20
`
	jsonText := `{"sources": [{"id": "web", "writeKey": "wk"}],
 "identity": {"blocked": ["^[0-]*$", "(?i)^(null|anonymous)$", "@example\\.invalid$"],
   "limits": {"user_id": 1, "email": 2, "*": 5, "window": "720h"},
   "priority": ["user_id", "email", "ios.idfa"], "maxMerges": 20}}`
	want := &IdentityRules{
		Blocked:   &[]string{`^[0-]*$`, `(?i)^(null|anonymous)$`, `@example\.invalid$`},
		Limits:    &IdentityLimits{PerType: map[string]int{"user_id": 1, "email": 2, "*": 5}, Window: Duration(720 * time.Hour)},
		Priority:  []string{"user_id", "email", "ios.idfa"},
		MaxMerges: 20,
	}
	for format, text := range map[string]string{ConfigFormatYAML: yamlText, ConfigFormatJSON: jsonText} {
		cfg, err := ParseConfig([]byte(text), format)
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if !reflect.DeepEqual(cfg.Identity, want) {
			t.Fatalf("%s: identity = %+v, want %+v", format, cfg.Identity, want)
		}
		recs, err := cfg.Records()
		if err != nil {
			t.Fatal(err)
		}
		last := recs[len(recs)-1]
		if last.Key != "identity/rules" {
			t.Fatalf("%s: last record %s, want identity/rules", format, last.Key)
		}
		obj, err := DecodeConfigRecord(last.Key, last.Value)
		if err != nil {
			t.Fatalf("%s: %v (%s)", format, err, last.Value)
		}
		if !reflect.DeepEqual(obj.Identity, want) || obj.Kind != ConfigKindIdentity || obj.Deleted() {
			t.Fatalf("%s: the record reads back as %+v, want %+v", format, obj.Identity, want)
		}
	}
}

// TestIdentityRulesEmptyBlocked: `blocked: []` blocks nothing, and stays given (not left out,
// which would keep the setting's defaults) through its record.
func TestIdentityRulesEmptyBlocked(t *testing.T) {
	cfg, err := ParseConfig([]byte("identity: {blocked: []}\n"), ConfigFormatYAML)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := cfg.Records()
	if err != nil {
		t.Fatal(err)
	}
	obj, err := DecodeConfigRecord(recs[0].Key, recs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	expr, given := obj.Identity.BlockedExpression()
	if !given {
		t.Fatalf("an empty blocked list was lost in its record %s", recs[0].Value)
	}
	re := regexp.MustCompile(expr)
	for _, v := range []string{"", "null", "0", "-1", "anonymous", "ada@example.com", "\x00"} {
		if re.MatchString(v) {
			t.Errorf("an empty blocked list blocks %q", v)
		}
	}
	if _, given := (&IdentityRules{}).BlockedExpression(); given {
		t.Error("blocked left out counts as given")
	}
}

// TestIdentityRulesBlockedExpression: several expressions block what any of them matches.
func TestIdentityRulesBlockedExpression(t *testing.T) {
	r := &IdentityRules{Blocked: &[]string{`^-1$`, `(?i)^test`, `x|y`}}
	expr, _ := r.BlockedExpression()
	re := regexp.MustCompile(expr)
	for v, want := range map[string]bool{"-1": true, "TEST-42": true, "x": true, "a-y": true, "-12": false, "ada": false} {
		if got := re.MatchString(v); got != want {
			t.Errorf("%q blocked: %v, want %v (expression %s)", v, got, want, expr)
		}
	}
}

// TestIdentityRulesBad: each mistake of the identity section is an error with its line.
func TestIdentityRulesBad(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"unknown field", "identity:\n  maxMerge: 5\n", `2: identity: unknown field "maxMerge" (did you mean "maxMerges"?)`},
		{"limits a list", "identity:\n  limits: [user_id]\n", `2: identity.limits: want a mapping such as {user_id: 1, email: 5, window: 720h}, got a list`},
		{"limit not a number", "identity:\n  limits:\n    email: five\n", `3: identity.limits["email"]: want an integer, got a string "five"`},
		{"window not a duration", "identity:\n  limits:\n    window: 30\n", `3: identity.limits["window"]: want a duration string such as "720h", got a number "30"`},
		{"repeated limit", "identity:\n  limits:\n    email: 1\n    email: 2\n", `4: identity.limits["email"]: repeated key (first at line 3)`},
		{"two user ids", "identity:\n  limits:\n    user_id: 2\n", `3: identity.limits["user_id"]: a profile has one user id (its key): the limit is 1, got 2`},
		{"limit zero", "identity:\n  limits:\n    email: 0\n", `3: identity.limits["email"]: must be at least 1, got 0`},
		{"bad expression", "identity:\n  blocked:\n    - '^(null'\n", "3: identity.blocked[0]: not a regular expression: error parsing regexp: missing closing ): `^(null`"},
		{"priority twice", "identity:\n  priority: [email, user_id, email]\n", `2: identity.priority[2]: "email" is empty, not an id type or listed twice`},
		{"negative merges", "identity:\n  maxMerges: -1\n", `2: identity.maxMerges: must be at least 1, got -1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(tt.text), ConfigFormatYAML)
			if err == nil {
				err = cfg.Validate()
			}
			if err == nil {
				t.Fatalf("no error, want %s", tt.want)
			}
			if got := strings.TrimPrefix(err.Error(), "line "); got != tt.want {
				t.Errorf("error:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

// TestIdentityRecordKey: the identity rules have one key; another is refused.
func TestIdentityRecordKey(t *testing.T) {
	if _, err := DecodeConfigRecord("identity/other", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "the identity rules' key is identity/rules") {
		t.Fatalf("identity/other: %v", err)
	}
	obj, err := DecodeConfigRecord("identity/rules", nil)
	if err != nil || !obj.Deleted() || obj.Kind != ConfigKindIdentity {
		t.Fatalf("the tombstone: %+v %v", obj, err)
	}
}
