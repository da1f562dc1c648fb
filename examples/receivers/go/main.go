//go:build ignore

// A minimal Tributary webhook receiver in Go, standard library only (docs/receivers.md).
//
//	SHARED_SECRET=dev-secret PORT=9000 go run examples/receivers/go/main.go
//
// Environment: SHARED_SECRET (required), PREVIOUS_SHARED_SECRET (also accepted, during a
// rotation), STANDARD_WEBHOOKS=true (verify webhook-id/-timestamp/-signature instead of
// X-Signature), PORT (default 9000), HOST (default 127.0.0.1).
//
// It verifies the signature over the RAW body bytes. Never decode the JSON and encode it again
// before verifying: key order, spacing, number formats (12345678901234567890123, 25.00) and
// escapes would change, and so would the HMAC.
//
// Inside Go you can also import github.com/tributary-cdp/tributary/schemas and call
// VerifyXSignature / VerifyStandardWebhooks; this file spells the algorithm out.
package main

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

const tolerance = 5 * time.Minute // refuse webhook-timestamps further than this from our clock

var (
	secrets  []string // the current secret first, then the previous one during a rotation
	standard = os.Getenv("STANDARD_WEBHOOKS") == "true"
)

// verifyXSignature: X-Signature = lower-case hex HMAC-SHA1(secret, body).
func verifyXSignature(h http.Header, body []byte) error {
	got := strings.ToLower(strings.TrimSpace(h.Get("X-Signature")))
	if got == "" {
		return errors.New("missing X-Signature")
	}
	for _, s := range secrets {
		m := hmac.New(sha1.New, []byte(s))
		m.Write(body)
		if hmac.Equal([]byte(got), []byte(hex.EncodeToString(m.Sum(nil)))) { // constant time
			return nil
		}
	}
	return errors.New("bad X-Signature")
}

var digits = regexp.MustCompile(`^[0-9]+$`)

// verifyStandardWebhooks: webhook-signature holds space-separated "v1,<base64>" signatures,
// each base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)); one must match.
func verifyStandardWebhooks(h http.Header, body []byte) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || !digits.MatchString(ts) || sigs == "" {
		return errors.New("missing or malformed webhook-id, webhook-timestamp or webhook-signature")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("malformed webhook-timestamp")
	}
	if d := time.Since(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return errors.New("webhook-timestamp too far from now") // a replay, or a wrong clock
	}
	for _, s := range secrets {
		m := hmac.New(sha256.New, standardKey(s))
		m.Write([]byte(id + "." + ts + "."))
		m.Write(body)
		want := []byte("v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)))
		for _, sig := range strings.Fields(sigs) {
			if hmac.Equal([]byte(sig), want) {
				return nil
			}
		}
	}
	return errors.New("bad webhook-signature")
}

// standardKey is the HMAC key of a secret: the base64-decoded part after "whsec_" when the
// secret has that form, else the secret's own bytes.
func standardKey(secret string) []byte {
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		if k, err := base64.StdEncoding.DecodeString(rest); err == nil {
			return k
		}
	}
	return []byte(secret)
}

// seen remembers the last 10,000 message ids: delivery is at-least-once, so the same message
// may arrive twice. A real receiver keeps them where it keeps the effect (same transaction).
var seen = struct {
	sync.Mutex
	ids   map[string]bool
	order []string
}{ids: map[string]bool{}}

func firstTime(id string) bool {
	seen.Lock()
	defer seen.Unlock()
	if seen.ids[id] {
		return false
	}
	seen.ids[id] = true
	if seen.order = append(seen.order, id); len(seen.order) > 10000 {
		delete(seen.ids, seen.order[0])
		seen.order = seen.order[1:]
	}
	return true
}

func webhook(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20)) // the raw bytes
	if err != nil {
		http.Error(w, "body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	verify, id := verifyXSignature, r.Header.Get("X-Message-Id")
	if standard {
		verify, id = verifyStandardWebhooks, r.Header.Get("webhook-id") // signed, unlike X-Message-Id
	}
	if err := verify(r.Header, body); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized) // 4xx: not retried
		return
	}
	var msg struct{ Type, UserID string }
	if err := json.Unmarshal(body, &msg); err != nil { // decode only after verifying
		http.Error(w, "not JSON", http.StatusBadRequest)
		return
	}
	if id != "" && !firstTime(id) {
		w.Write([]byte("duplicate\n")) // still 2xx, or Tributary would retry it
		return
	}
	log.Printf("webhook %s type=%s userId=%s", id, msg.Type, msg.UserID)
	// Answer within 5 seconds: queue slow work and return.
	w.Write([]byte("ok\n"))
}

func main() {
	for _, s := range []string{os.Getenv("SHARED_SECRET"), os.Getenv("PREVIOUS_SHARED_SECRET")} {
		if s != "" {
			secrets = append(secrets, s)
		}
	}
	if len(secrets) == 0 {
		log.Fatal("set SHARED_SECRET to the destination's sharedSecret")
	}
	host, port := os.Getenv("HOST"), os.Getenv("PORT")
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "9000"
	}
	addr := net.JoinHostPort(host, port)
	log.Printf("listening on http://%s (standard webhooks: %v)", addr, standard)
	srv := &http.Server{Addr: addr, Handler: http.HandlerFunc(webhook), ReadHeaderTimeout: 5 * time.Second}
	log.Fatal(srv.ListenAndServe())
}
