package deliverer

import (
	"sync"
	"testing"

	"github.com/tributary-cdp/tributary/schemas"
)

// TestXSignatureIsSchemas: the deliverer's pooled X-Signature is schemas.XSignature, byte for
// byte, for every secret and body, from concurrent POSTs (docs/receivers.md#x-signature).
func TestXSignatureIsSchemas(t *testing.T) {
	var wg sync.WaitGroup
	for _, secret := range []string{"s3cret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "é", "a-secret-longer-than-the-sha1-block-size-of-sixty-four-bytes-0123456789"} {
		for _, body := range []string{"", "{}", `{"messageId":"m-1","type":"track"}`} {
			wg.Go(func() {
				for range 50 {
					if got, want := xSignature(secret, []byte(body)), schemas.XSignature(secret, []byte(body)); got != want {
						t.Errorf("xSignature(%q, %q) = %s, want %s", secret, body, got, want)
						return
					}
				}
			})
		}
	}
	wg.Wait()
}
