package schemas

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"sync"
	"testing"
)

// The vectors are also in docs/receivers.md, for receivers in any language.
func TestSignatureVectors(t *testing.T) {
	body := []byte(`{"version":1,"type":"track","userId":"u1","event":"Signed Up","timestamp":"2026-01-02T03:04:05.678Z","messageId":"m-1"}`)
	// Computed independently: python3 -c 'import hmac,hashlib; print(hmac.new(b"s3cret", body, hashlib.sha1).hexdigest())'
	if got, want := XSignature("s3cret", body), "ed0ffccbf3f1bad4a5fa3343d636f8c216ffc219"; got != want {
		t.Fatalf("X-Signature %q, want %s", got, want)
	}
	sig := XSignature("s3cret", body)
	if !VerifyXSignature("s3cret", body, sig) || VerifyXSignature("other", body, sig) || VerifyXSignature("s3cret", append(body, ' '), sig) {
		t.Fatal("X-Signature verification")
	}
	h := StandardWebhooksHeader("m-1", 1767323045, body, "new", "", "old")
	if !VerifyStandardWebhooks("new", "m-1", 1767323045, body, h) || !VerifyStandardWebhooks("old", "m-1", 1767323045, body, h) {
		t.Fatalf("both secrets must verify during a rotation: %s", h)
	}
	if VerifyStandardWebhooks("new", "m-1", 1767323046, body, h) || VerifyStandardWebhooks("new", "m-2", 1767323045, body, h) {
		t.Fatal("timestamp and id are signed")
	}
	// Standard Webhooks' own test vector (standard-webhooks spec repository).
	std := StandardWebhooksSignature("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if std != "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=" {
		t.Fatalf("standard webhooks vector: %s", std)
	}
}

// TestXSignaturePooledIsHMAC: the pooled X-Signature is lowercase hex HMAC-SHA1 of the body,
// byte for byte, for every secret and body, from concurrent callers (docs/receivers.md#x-signature-segment-compatible).
func TestXSignaturePooledIsHMAC(t *testing.T) {
	var wg sync.WaitGroup
	for _, secret := range []string{"s3cret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "é", "a-secret-longer-than-the-sha1-block-size-of-sixty-four-bytes-0123456789"} {
		for _, body := range []string{"", "{}", `{"messageId":"m-1","type":"track"}`} {
			m := hmac.New(sha1.New, []byte(secret))
			m.Write([]byte(body))
			want := hex.EncodeToString(m.Sum(nil))
			wg.Go(func() {
				for range 50 {
					if got := XSignature(secret, []byte(body)); got != want {
						t.Errorf("XSignature(%q, %q) = %s, want %s", secret, body, got, want)
						return
					}
				}
			})
		}
	}
	wg.Wait()
}
