package schemas

import (
	"encoding/json"
	"fmt"
	"time"
)

// SessionRevocation is the value of one tributary.sessions record (docs/topics.md#tributarysessions),
// keyed by the session's key (the console's hash of its session id, never the id itself): the
// console session was signed out, and every console refuses it from then on. The record is
// useless after ExpiresAt, when the session's cookie ends anyway; the topic's retention drops it.
type SessionRevocation struct {
	// RevokedAt is when the session was signed out (FormatTimestamp).
	RevokedAt string `json:"revokedAt"`
	// ExpiresAt is when the session would have ended by itself (FormatTimestamp).
	ExpiresAt string `json:"expiresAt"`
}

// Record encodes the revocation's value.
func (r SessionRevocation) Record() []byte {
	b, _ := json.Marshal(r) // cannot fail: strings only
	return b
}

// DecodeSessionRevocation decodes one tributary.sessions value and returns it with its
// ExpiresAt parsed. Unknown fields are ignored (a later console may add some); expiresAt is
// required.
func DecodeSessionRevocation(data []byte) (SessionRevocation, time.Time, error) {
	var r SessionRevocation
	if err := json.Unmarshal(data, &r); err != nil {
		return SessionRevocation{}, time.Time{}, fmt.Errorf("session revocation: %w", err)
	}
	expires, err := ParseTimestamp(r.ExpiresAt)
	if err != nil {
		return SessionRevocation{}, time.Time{}, fmt.Errorf("session revocation: expiresAt: %w", err)
	}
	return r, expires, nil
}
