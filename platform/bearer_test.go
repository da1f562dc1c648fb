package platform_test

import (
	"net/http"
	"testing"

	"github.com/tributary-cdp/tributary/platform"
)

// TestBearerMatches: the Bearer scheme in any case (RFC 7235), the token compared exactly;
// other schemes, a missing token and an empty expected token never match.
func TestBearerMatches(t *testing.T) {
	for _, tt := range []struct {
		header string
		want   string
		ok     bool
	}{
		{"Bearer s3cret-token", "s3cret-token", true},
		{"bearer s3cret-token", "s3cret-token", true},
		{"BEARER s3cret-token", "s3cret-token", true},
		{"Bearer  s3cret-token ", "s3cret-token", true},
		{"Bearer s3cret-tokenx", "s3cret-token", false},
		{"Bearer s3cret", "s3cret-token", false},
		{"Basic s3cret-token", "s3cret-token", false},
		{"Bearers3cret-token", "s3cret-token", false},
		{"Bearer", "s3cret-token", false},
		{"", "s3cret-token", false},
		{"Bearer ", "", false},
	} {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		if tt.header != "" {
			r.Header.Set("Authorization", tt.header)
		}
		if got := platform.BearerMatches(r, tt.want); got != tt.ok {
			t.Errorf("Authorization %q, want %q: %v, want %v", tt.header, tt.want, got, tt.ok)
		}
	}
}
