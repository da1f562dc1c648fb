package schemas

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"hash"
	"strconv"
	"strings"
	"sync"
)

// Signature headers of a delivered webhook (docs/receivers.md#verifying-signatures; https://www.standardwebhooks.com).
const (
	// HeaderXSignature is lowercase hex HMAC-SHA1(sharedSecret, body), sent only when the
	// destination has a sharedSecret.
	HeaderXSignature = "X-Signature"
	// HeaderXMessageID carries the message id on every POST, for receivers that de-duplicate.
	HeaderXMessageID = "X-Message-Id"
	// Standard Webhooks headers, sent when the destination sets standardWebhooks.
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// XSignature returns the X-Signature of body: lowercase hex HMAC-SHA1 keyed with secret over
// the exact body bytes.
//
// The HMAC states keyed with each secret are pooled: the deliverer signs every POST, and a new
// HMAC costs half a dozen allocations. Secrets come from the config: the set is small.
func XSignature(secret string, body []byte) string {
	p, ok := xSigners.Load(secret)
	if !ok {
		p, _ = xSigners.LoadOrStore(secret, &sync.Pool{New: func() any { return &xSigner{mac: hmac.New(sha1.New, []byte(secret))} }})
	}
	pool := p.(*sync.Pool)
	sg := pool.Get().(*xSigner)
	sg.mac.Reset()
	sg.mac.Write(body)
	var out [2 * sha1.Size]byte
	hex.Encode(out[:], sg.mac.Sum(sg.sum[:0]))
	pool.Put(sg)
	return string(out[:])
}

// xSigners holds, per shared secret, a pool of *xSigner keyed with it.
var xSigners sync.Map

type xSigner struct {
	mac hash.Hash
	sum [sha1.Size]byte
}

// VerifyXSignature reports whether sig is body's X-Signature under secret (constant time).
func VerifyXSignature(secret string, body []byte, sig string) bool {
	want := XSignature(secret, body)
	return hmac.Equal([]byte(want), []byte(strings.ToLower(strings.TrimSpace(sig))))
}

// StandardWebhooksKey is the HMAC key of a Standard Webhooks secret: the base64-decoded part
// after "whsec_" when the secret has that form, else the secret's own bytes.
func StandardWebhooksKey(secret string) []byte {
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		if k, err := base64.StdEncoding.DecodeString(rest); err == nil {
			return k
		}
	}
	return []byte(secret)
}

// StandardWebhooksSignature returns one signature of the webhook-signature header:
// "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)), timestamp in Unix
// seconds.
func StandardWebhooksSignature(secret, id string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, StandardWebhooksKey(secret))
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, timestamp, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// StandardWebhooksHeader returns the webhook-signature header value: the signature under each
// non-empty secret, space-separated (the current secret first, then a previous one during a
// rotation).
func StandardWebhooksHeader(id string, timestamp int64, body []byte, secrets ...string) string {
	var sigs []string
	for _, s := range secrets {
		if s != "" {
			sigs = append(sigs, StandardWebhooksSignature(s, id, timestamp, body))
		}
	}
	return strings.Join(sigs, " ")
}

// VerifyStandardWebhooks reports whether any signature of header is valid for body under
// secret. It does not check the timestamp's age; receivers should also refuse timestamps more
// than a few minutes from their clock.
func VerifyStandardWebhooks(secret, id string, timestamp int64, body []byte, header string) bool {
	want := StandardWebhooksSignature(secret, id, timestamp, body)
	for _, sig := range strings.Fields(header) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return true
		}
	}
	return false
}
