package deliverer

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"hash"
	"sync"
)

// signers holds, per shared secret, a pool of HMAC-SHA1 states keyed with it: X-Signature
// (docs/receivers.md#x-signature) computed without the half-dozen allocations of a new HMAC per
// POST. Secrets come from the config: the set is small.
var signers sync.Map // secret → *sync.Pool of *signer

type signer struct {
	mac hash.Hash
	sum [sha1.Size]byte
}

// xSignature is schemas.XSignature: lower-case hex of HMAC-SHA1(secret, body).
func xSignature(secret string, body []byte) string {
	p, ok := signers.Load(secret)
	if !ok {
		p, _ = signers.LoadOrStore(secret, &sync.Pool{New: func() any { return &signer{mac: hmac.New(sha1.New, []byte(secret))} }})
	}
	pool := p.(*sync.Pool)
	sg := pool.Get().(*signer)
	sg.mac.Reset()
	sg.mac.Write(body)
	var out [2 * sha1.Size]byte
	hex.Encode(out[:], sg.mac.Sum(sg.sum[:0]))
	pool.Put(sg)
	return string(out[:])
}
