package schemas

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

func testKey(b byte) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32)) }

func sealedDestination(t *testing.T, keys *Keyring) ConfigRecord {
	t.Helper()
	d := Destination{ID: "order-hooks", Type: DestinationTypeWebhooks, Sources: []string{"web"},
		Settings: DestinationSettings{
			Webhooks: []Webhook{
				{URL: "https://hooks.example.com/a", Headers: map[string]string{"Authorization": "Bearer tok-a1", "X-Team": "growth"}},
				{URL: "https://hooks.example.com/b", Headers: map[string]string{"Authorization": "Bearer tok-b2"}},
			},
			SharedSecret: "s3cret-now", PreviousSharedSecret: "s3cret-before", StandardWebhooks: true,
		}}
	rec, err := d.Record()
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := SealConfigRecord(rec, keys)
	if err != nil {
		t.Fatal(err)
	}
	return sealed
}

var secrets = []string{"s3cret-now", "s3cret-before", "Bearer tok-a1", "Bearer tok-b2", "growth"}

// TestConfigSecretsAtRest: with a keyring, a destination record holds none of its secrets in
// clear, and decodes back to them; plain records still decode; a record whose key is not in
// the ring, moved to another object or altered fails with an error naming the key id.
func TestConfigSecretsAtRest(t *testing.T) {
	keys, err := ParseKeyring("k2026:" + testKey(1))
	if err != nil {
		t.Fatal(err)
	}
	rec := sealedDestination(t, keys)
	for _, s := range secrets {
		if bytes.Contains(rec.Value, []byte(s)) {
			t.Errorf("the sealed record holds %q in clear: %s", s, rec.Value)
		}
	}
	if !bytes.Contains(rec.Value, []byte(`"enc:v1:k2026:`)) || !bytes.Contains(rec.Value, []byte(`"X-Team"`)) {
		t.Errorf("want encrypted values with the key id and header names in clear: %s", rec.Value)
	}
	obj, err := DecodeConfigRecordWith(rec.Key, rec.Value, keys)
	if err != nil {
		t.Fatal(err)
	}
	s := obj.Destination.Settings
	if s.SharedSecret != "s3cret-now" || s.PreviousSharedSecret != "s3cret-before" ||
		s.Webhooks[0].Headers["Authorization"] != "Bearer tok-a1" || s.Webhooks[0].Headers["X-Team"] != "growth" ||
		s.Webhooks[1].Headers["Authorization"] != "Bearer tok-b2" {
		t.Errorf("decrypted settings %+v", s)
	}
	again, err := SealConfigRecord(rec, keys) // sealing twice does not encrypt the ciphertext
	if err != nil || !bytes.Equal(again.Value, rec.Value) {
		t.Errorf("sealing a sealed record changed it (%v)", err)
	}

	t.Run("no key set", func(t *testing.T) {
		_, err := DecodeConfigRecord(rec.Key, rec.Value)
		if err == nil || !strings.Contains(err.Error(), "CONFIG_ENCRYPTION_KEY is not set") || !strings.Contains(err.Error(), "k2026") {
			t.Errorf("decoding without keys: %v", err)
		}
		plain := sealedDestination(t, nil)
		if bytes.Contains(plain.Value, []byte(EncryptedPrefix)) || !bytes.Contains(plain.Value, []byte("s3cret-now")) {
			t.Errorf("without keys the record must stay as it was: %s", plain.Value)
		}
		if obj, err := DecodeConfigRecordWith(plain.Key, plain.Value, keys); err != nil || obj.Destination.Settings.SharedSecret != "s3cret-now" {
			t.Errorf("a plain record read with keys: %v", err)
		}
		if !NeedsSealing(plain, keys) || NeedsSealing(plain, nil) || NeedsSealing(rec, nil) {
			t.Error("NeedsSealing: want true for a plain record with keys, false without keys")
		}
		src, err := (&Source{ID: "web", WriteKey: "wk_web"}).Record()
		if err != nil {
			t.Fatal(err)
		}
		noSecrets, err := (&Destination{ID: "d", Type: DestinationTypeWebhooks, Sources: []string{"web"},
			Settings: DestinationSettings{Webhooks: []Webhook{{URL: "https://hooks.example.com/a"}}}}).Record()
		if err != nil {
			t.Fatal(err)
		}
		if NeedsSealing(src, keys) || NeedsSealing(noSecrets, keys) || NeedsSealing(ConfigRecord{Key: rec.Key}, keys) {
			t.Error("NeedsSealing: want false for a source, a destination without secrets, a tombstone")
		}
		if same, err := SealConfigRecord(plain, nil); err != nil || !bytes.Equal(same.Value, plain.Value) {
			t.Errorf("sealing without keys changed the record (%v)", err)
		}
	})
	t.Run("rotation", func(t *testing.T) {
		both, err := ParseKeyring("k2027:" + testKey(2) + ", k2026:" + testKey(1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeConfigRecordWith(rec.Key, rec.Value, both); err != nil {
			t.Errorf("an old record with the old key second in the ring: %v", err)
		}
		newRec := sealedDestination(t, both)
		if !bytes.Contains(newRec.Value, []byte("enc:v1:k2027:")) || bytes.Contains(newRec.Value, []byte("k2026")) {
			t.Errorf("new records must use the first key: %s", newRec.Value)
		}
		if !NeedsSealing(rec, both) || NeedsSealing(newRec, both) || NeedsSealing(rec, keys) {
			t.Error("NeedsSealing: want true for a record of the old key only, once the new key is first")
		}
		onlyNew, _ := ParseKeyring("k2027:" + testKey(2))
		_, err = DecodeConfigRecordWith(rec.Key, rec.Value, onlyNew)
		if err == nil || !strings.Contains(err.Error(), `"k2026"`) || !strings.Contains(err.Error(), "does not list") {
			t.Errorf("an old record once the old key is dropped: %v", err)
		}
		for range 20 { // the first secret that fails is always the same one
			if _, again := DecodeConfigRecordWith(rec.Key, rec.Value, onlyNew); again == nil || again.Error() != err.Error() ||
				!strings.Contains(err.Error(), "settings.sharedSecret: ") {
				t.Fatalf("decoding again: %v, first %v; want the same error, on settings.sharedSecret", again, err)
			}
		}
		sameID, _ := ParseKeyring("k2026:" + testKey(9))
		if _, err := DecodeConfigRecordWith(rec.Key, rec.Value, sameID); err == nil || !strings.Contains(err.Error(), "does not decrypt") {
			t.Errorf("another key under the same id: %v", err)
		}
	})
	t.Run("moved or altered", func(t *testing.T) {
		moved := ConfigRecord{Key: "destination/other-hooks", Value: bytes.Replace(rec.Value, []byte(`"id":"order-hooks"`), []byte(`"id":"other-hooks"`), 1)}
		if _, err := DecodeConfigRecordWith(moved.Key, moved.Value, keys); err == nil || !strings.Contains(err.Error(), "does not decrypt") {
			t.Errorf("a ciphertext moved to another destination: %v", err)
		}
		i := bytes.Index(rec.Value, []byte("enc:v1:k2026:")) + len("enc:v1:k2026:") + 5
		altered := bytes.Clone(rec.Value)
		altered[i] ^= 'A' ^ 'B'
		if altered[i] == rec.Value[i] {
			altered[i] = 'C'
		}
		if _, err := DecodeConfigRecordWith(rec.Key, altered, keys); err == nil {
			t.Error("an altered ciphertext decoded")
		}
	})
}

func TestParseKeyring(t *testing.T) {
	good := testKey(7)
	if k, err := ParseKeyring(""); k != nil || err != nil {
		t.Errorf("empty: %v, %v; want no keyring", k, err)
	}
	if k, err := ParseKeyring("a:" + good + ",b-2:" + strings.TrimRight(base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{8}, 32)), "=")); err != nil || strings.Join(k.KeyIDs(), ",") != "a,b-2" {
		t.Errorf("two keys (std and raw URL base64): %v", err)
	}
	short := base64.StdEncoding.EncodeToString([]byte("sixteen bytes!!!"))
	for _, tt := range []struct{ spec, want string }{
		{good, "want <key id>:<base64 key>"},
		{"Bad:" + good, "want <key id>:<base64 key>"},
		{"a:" + good + ",a:" + good, "listed twice"},
		{"a:not*base64", "not base64"},
		{"a:" + short, "16 bytes, want 32"},
	} {
		_, err := ParseKeyring(tt.spec)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "CONFIG_ENCRYPTION_KEY") {
			t.Errorf("ParseKeyring(%q) = %v, want an error with %q", tt.spec, err, tt.want)
		}
		if err != nil && (strings.Contains(err.Error(), good) || strings.Contains(err.Error(), short) || strings.Contains(err.Error(), "not*base64")) {
			t.Errorf("the error shows the key material: %v", err)
		}
	}
}

// TestEncryptedValueFormat decrypts sealed values the way docs/topics.md describes them, with
// nothing but AES-GCM: a consumer in another language can rely on that description.
func TestEncryptedValueFormat(t *testing.T) {
	keys, err := ParseKeyring("k2026:" + testKey(1))
	if err != nil {
		t.Fatal(err)
	}
	rec := sealedDestination(t, keys)
	var v struct {
		Settings struct {
			SharedSecret string
			Webhooks     []struct{ Headers map[string]string }
		}
	}
	if err := json.Unmarshal(rec.Value, &v); err != nil {
		t.Fatal(err)
	}
	block, err := aes.NewCipher(bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ value, aad, want string }{
		{v.Settings.SharedSecret, "destination/order-hooks settings.sharedSecret", "s3cret-now"},
		{v.Settings.Webhooks[0].Headers["Authorization"], "destination/order-hooks settings.webhooks[0].headers.Authorization", "Bearer tok-a1"},
		{v.Settings.Webhooks[1].Headers["Authorization"], "destination/order-hooks settings.webhooks[1].headers.Authorization", "Bearer tok-b2"},
	} {
		data, ok := strings.CutPrefix(tt.value, "enc:v1:k2026:")
		if !ok {
			t.Fatalf("%s: %q is not enc:v1:k2026:<data>", tt.aad, tt.value)
		}
		raw, err := base64.RawURLEncoding.DecodeString(data)
		if err != nil || len(raw) != 12+len(tt.want)+16 {
			t.Fatalf("%s: data is not base64url of a 12-byte nonce, the ciphertext and a 16-byte tag (%v)", tt.aad, err)
		}
		plain, err := gcm.Open(nil, raw[:12], raw[12:], []byte(tt.aad))
		if err != nil || string(plain) != tt.want {
			t.Errorf("%s: decrypted %q (%v), want %q", tt.aad, plain, err, tt.want)
		}
	}
}

// TestConfigURLCredentialsAtRest: a webhook URL with user info or a query is a secret at rest
// (encrypted whole, decoded back, resealed on rotation); a URL without either stays readable.
func TestConfigURLCredentialsAtRest(t *testing.T) {
	keys, err := ParseKeyring("k2026:" + testKey(1))
	if err != nil {
		t.Fatal(err)
	}
	d := Destination{ID: "crm", Type: DestinationTypeWebhooks, Sources: []string{"web"},
		Settings: DestinationSettings{Webhooks: []Webhook{
			{URL: "https://svc-user:pa55-word@hooks.example.com/a"},
			{URL: "https://hooks.example.com/b?token=tok-in-query&team=growth"},
			{URL: "https://hooks.example.com/plain/path"},
		}}}
	rec, err := d.Record()
	if err != nil {
		t.Fatal(err)
	}
	if !NeedsSealing(rec, keys) {
		t.Error("a plain record whose URLs carry credentials must need sealing")
	}
	sealed, err := SealConfigRecord(rec, keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"svc-user", "pa55-word", "tok-in-query", "hooks.example.com/a", "hooks.example.com/b"} {
		if bytes.Contains(sealed.Value, []byte(s)) {
			t.Errorf("the sealed record holds %q in clear: %s", s, sealed.Value)
		}
	}
	if !bytes.Contains(sealed.Value, []byte(`"https://hooks.example.com/plain/path"`)) {
		t.Errorf("a URL without credentials must stay readable: %s", sealed.Value)
	}
	if NeedsSealing(sealed, keys) {
		t.Error("a sealed record needs no sealing")
	}
	obj, err := DecodeConfigRecordWith(sealed.Key, sealed.Value, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, wh := range obj.Destination.Settings.Webhooks {
		if wh.URL != d.Settings.Webhooks[i].URL {
			t.Errorf("webhook %d decoded as %q, want %q", i, wh.URL, d.Settings.Webhooks[i].URL)
		}
	}
	both, _ := ParseKeyring("k2027:" + testKey(2) + ",k2026:" + testKey(1))
	if !NeedsSealing(sealed, both) {
		t.Error("a URL sealed with the old key must need sealing once a new key is first")
	}
}

// TestMasks: the console's masks show at most the last two characters of a long secret (and
// an authorization scheme), never a short one; a URL's user info and query values are masked.
func TestMasks(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"Bearer sk_live_0123456789abcdef88", "Bearer " + Mask + "88"},
		{"bearer short", "bearer " + Mask},
		{"0123456789abcdefXY", Mask + "XY"},
		{"growth", Mask},
		{"two words but no scheme 0123456789", Mask + "89"},
	} {
		if got := MaskSecret(tt.in); got != tt.want {
			t.Errorf("MaskSecret(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if tt.in != "" && !IsMasked(MaskSecret(tt.in)) {
			t.Errorf("IsMasked(MaskSecret(%q)) = false", tt.in)
		}
	}
	for _, tt := range []struct{ in, want string }{
		{"https://hooks.example.com/a", "https://hooks.example.com/a"},
		{"https://u:p@hooks.example.com/a?token=abc&team=x", "https://" + Mask + ":" + Mask + "@hooks.example.com/a?token=" + Mask + "&team=" + Mask},
		{"https://only-user@hooks.example.com/", "https://" + Mask + "@hooks.example.com/"},
		{"https://hooks.example.com/b?bare-token", "https://hooks.example.com/b?" + Mask},
		{"https://hooks.example.com/c#frag", "https://hooks.example.com/c#frag"},
		{"https://hooks.example.com/c?t=1#frag", "https://hooks.example.com/c?t=" + Mask},
	} {
		if got := MaskURL(tt.in); got != tt.want {
			t.Errorf("MaskURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if IsMasked("Bearer plain") || IsMasked("https://hooks.example.com/a") {
		t.Error("IsMasked: true for a value without the mask")
	}
	if !URLHasCredentials("https://u@h/") || !URLHasCredentials("https://h/?t=1") || URLHasCredentials("https://h/p") {
		t.Error("URLHasCredentials")
	}
}
