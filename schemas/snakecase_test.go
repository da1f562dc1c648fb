package schemas

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestSnakeCase(t *testing.T) {
	tests := []struct{ name, want string }{
		// The examples of docs/configuration.md#audience-names-and-trait-keys-snake_case and
		// docs/audiences.md#trait-keys.
		{"Power Users", "power_users"},
		{"High-Value Customers", "high_value_customers"},
		{"orderCount", "order_count"},
		{"Orders 30 days", "orders_30_days"},
		{"Orders 30d", "orders_30_d"}, // a number and a letter always split
		{"LTV ($)", "ltv"},
		{"Revenue (€, 90d)", "revenue_90_d"},
		// Spaces and punctuation runs, leading and trailing separators.
		{"  Power   Users  ", "power_users"},
		{"Power-Users", "power_users"},
		{"power_users", "power_users"},
		{"Power & Users!!!", "power_users"},
		{"--Power Users--", "power_users"},
		{"...", ""},
		{"", ""},
		{"🔥 Hot Leads 🔥", "hot_leads"},
		{"a.b/c", "a_b_c"},
		// Apostrophes are dropped, not separators.
		{"Mom's Picks", "moms_picks"},
		{"Mom’s Picks", "moms_picks"},
		// Digits.
		{"Top 10 Buyers", "top_10_buyers"},
		{"Top10Buyers", "top_10_buyers"},
		{"top10buyers", "top_10_buyers"},
		{"2024 Cohort", "2024_cohort"},
		{"v2", "v_2"},
		{"1,000 Points", "1_000_points"},
		// camelCase, PascalCase and acronyms.
		{"powerUsers", "power_users"},
		{"PowerUsers", "power_users"},
		{"HTTPServer", "http_server"},
		{"getHTTPResponse", "get_http_response"},
		{"ABC", "abc"},
		{"iOSUsers", "i_os_users"},
		{"POWER USERS", "power_users"},
		{"A", "a"},
		// Non-ASCII letters are lower-cased and kept.
		{"Café Lovers", "café_lovers"},
		{"ÉCOLE Élèves", "école_élèves"},
		{"Ärger Über", "ärger_über"},
		{"ΟΔΥΣΣΕΑΣ", "οδυσσεασ"},
		{"日本 ユーザー", "日本_ユーザー"},
		{"日本2", "日本_2"},
		{"naïveUsers", "naïve_users"},
		// A combining mark stays with its letter and never splits a word.
		{"Cafe\u0301Lovers", "cafe\u0301_lovers"},
		// Invalid UTF-8 separates words.
		{"a\xffb", "a_b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SnakeCase(tt.name); got != tt.want {
				t.Errorf("SnakeCase(%q) = %q, want %q", tt.name, got, tt.want)
			}
		})
	}
}

// checkSnakeCase checks the properties SnakeCase promises for any input.
func checkSnakeCase(t *testing.T, name string) {
	t.Helper()
	got := SnakeCase(name)
	if again := SnakeCase(got); again != got {
		t.Errorf("not idempotent: SnakeCase(%q) = %q, SnakeCase(%q) = %q", name, got, got, again)
	}
	if !utf8.ValidString(got) {
		t.Errorf("SnakeCase(%q) = %q is not valid UTF-8", name, got)
	}
	if strings.HasPrefix(got, "_") || strings.HasSuffix(got, "_") || strings.Contains(got, "__") {
		t.Errorf("SnakeCase(%q) = %q has a stray separator", name, got)
	}
	for _, r := range got {
		if r != '_' && !unicode.IsLetter(r) && !unicode.IsMark(r) && !unicode.IsNumber(r) {
			t.Errorf("SnakeCase(%q) = %q holds %q", name, got, r)
		}
		if unicode.ToLower(r) != r {
			t.Errorf("SnakeCase(%q) = %q holds upper-case %q", name, got, r)
		}
	}
}

func FuzzSnakeCase(f *testing.F) {
	for _, s := range []string{"Power Users", "HTTPServer", "Top10Buyers", "Café Lovers", "Mom's", "a\u0301B", "ǅungla", "ⅫUsers"} {
		f.Add(s)
	}
	f.Fuzz(checkSnakeCase)
}
