package schemas_test

import (
	"testing"
	"time"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestSessionRevocationRoundTrip: what the console writes to tributary.sessions it reads back,
// expiry included; a record without a valid expiresAt is an error.
func TestSessionRevocationRoundTrip(t *testing.T) {
	exp := time.Date(2026, 11, 27, 13, 4, 5, 6e6, time.UTC)
	in := schemas.SessionRevocation{RevokedAt: schemas.FormatTimestamp(exp.Add(-time.Hour)), ExpiresAt: schemas.FormatTimestamp(exp)}
	out, at, err := schemas.DecodeSessionRevocation(in.Record())
	if err != nil || out != in || !at.Equal(exp) {
		t.Fatalf("round trip: %+v %s %v, want %+v %s", out, at, err, in, exp)
	}
	for _, bad := range []string{``, `{}`, `{"expiresAt":"tomorrow"}`, `[]`} {
		if _, _, err := schemas.DecodeSessionRevocation([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
