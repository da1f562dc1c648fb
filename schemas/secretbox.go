package schemas

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Secrets at rest (docs/configuration.md#secrets-at-rest). With CONFIG_ENCRYPTION_KEY set, the
// secrets of a destination — sharedSecret, previousSharedSecret, every static header value and
// every webhook URL that may carry a credential (user info or a query, URLHasCredentials) —
// are written to TopicConfig encrypted, each as
//
//	enc:v1:<key id>:<base64url of nonce ‖ AES-256-GCM ciphertext ‖ tag>
//
// with the record key and the field's path as additional data, so that a ciphertext moved to
// another object or field does not decrypt. Every service decrypts them when it reads the
// topic; in memory they are plain.

// EncryptedPrefix starts every encrypted config value.
const EncryptedPrefix = "enc:v1:"

// ConfigKeyVariable names the setting of the config's keys in errors.
const ConfigKeyVariable = "CONFIG_ENCRYPTION_KEY"

// Keyring holds the keys of CONFIG_ENCRYPTION_KEY (or of another setting in the same format,
// such as DATA_ENCRYPTION_KEY): the first encrypts, every one decrypts, so keys rotate by
// putting the new key first and dropping the old one once every record was written again. A
// nil *Keyring encrypts nothing and decrypts nothing.
type Keyring struct {
	primary string
	aeads   map[string]cipher.AEAD
	// variable names the setting the keys came from, in errors.
	variable string
}

// ParseKeyring parses CONFIG_ENCRYPTION_KEY: comma-separated `<key id>:<key>` entries, the key
// 32 bytes in standard or URL base64 (`head -c 32 /dev/urandom | base64`), the id 1 to 32 of
// a-z, 0-9, '-' and '_'. An empty spec returns nil (no encryption). Errors name the variable
// and the entry, never the key material.
func ParseKeyring(spec string) (*Keyring, error) { return ParseKeyringOf(ConfigKeyVariable, spec) }

// ParseKeyringOf is ParseKeyring for a setting named variable in the same format (errors name
// it): DATA_ENCRYPTION_KEY, the master key of the data keys (docs/security.md#crypto-shredding).
func ParseKeyringOf(variable, spec string) (*Keyring, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	k := &Keyring{aeads: map[string]cipher.AEAD{}, variable: variable}
	for i, entry := range strings.Split(spec, ",") {
		id, raw, ok := strings.Cut(strings.TrimSpace(entry), ":")
		where := variable + ": entry " + strconv.Itoa(i+1)
		if !ok || !validID(id) || len(id) > 32 {
			return nil, fmt.Errorf("%s: want <key id>:<base64 key>, the id 1 to 32 of a-z, 0-9, '-' and '_'", where)
		}
		where += " (key id " + id + ")"
		if _, dup := k.aeads[id]; dup {
			return nil, fmt.Errorf("%s: the key id is listed twice", where)
		}
		key, err := decodeKey(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: the key is not base64", where)
		}
		if len(key) != 32 {
			return nil, fmt.Errorf("%s: the key is %d bytes, want 32 (AES-256): head -c 32 /dev/urandom | base64", where, len(key))
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		k.aeads[id] = aead
		if k.primary == "" {
			k.primary = id
		}
	}
	return k, nil
}

func decodeKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

// KeyIDs returns the ids of the keyring's keys, the encrypting one first.
func (k *Keyring) KeyIDs() []string {
	if k == nil {
		return nil
	}
	rest := slices.Sorted(maps.Keys(k.aeads))
	rest = slices.DeleteFunc(rest, func(id string) bool { return id == k.primary })
	return append([]string{k.primary}, rest...)
}

// Seal encrypts plain with the first key, bound to aad (the same aad must be given to Open):
// "enc:v1:<key id>:<base64url of nonce ‖ ciphertext ‖ tag>". k must not be nil.
func (k *Keyring) Seal(aad, plain string) (string, error) { return k.seal(aad, plain) }

// Open decrypts a value of Seal with the key it names and the same aad. Its errors name the
// key id and the setting, never key material; on a nil k it says the setting is not set.
func (k *Keyring) Open(aad, value string) (string, error) {
	if k == nil && strings.HasPrefix(value, EncryptedPrefix) {
		id, _, _ := strings.Cut(strings.TrimPrefix(value, EncryptedPrefix), ":")
		return "", fmt.Errorf("encrypted with key %q, and no key is set", id)
	}
	return k.open(aad, value)
}

// Variable is the setting the keys came from ("" on a nil k).
func (k *Keyring) Variable() string {
	if k == nil {
		return ""
	}
	return k.variable
}

func (k *Keyring) seal(aad, plain string) (string, error) {
	aead := k.aeads[k.primary]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	sealed := aead.Seal(nonce, nonce, []byte(plain), []byte(aad))
	return EncryptedPrefix + k.primary + ":" + base64.RawURLEncoding.EncodeToString(sealed), nil
}

func (k *Keyring) open(aad, value string) (string, error) {
	id, payload, ok := strings.Cut(strings.TrimPrefix(value, EncryptedPrefix), ":")
	if !ok {
		return "", errors.New("not an encrypted value (" + EncryptedPrefix + "<key id>:<data>)")
	}
	if k == nil {
		return "", fmt.Errorf("encrypted with key %q, and %s is not set", id, ConfigKeyVariable)
	}
	aead, ok := k.aeads[id]
	if !ok {
		return "", fmt.Errorf("encrypted with key %q, which %s does not list (it has %s)", id, k.variable, strings.Join(k.KeyIDs(), ", "))
	}
	sealed, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || len(sealed) < aead.NonceSize()+aead.Overhead() {
		return "", fmt.Errorf("encrypted with key %q: the data is damaged", id)
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(aad))
	if err != nil {
		return "", fmt.Errorf("encrypted with key %q: it does not decrypt (another key with that id, or a value moved or altered)", id)
	}
	return string(plain), nil
}

// secretFields calls f with the path and a pointer of every secret of d, in a fixed order:
// sharedSecret, previousSharedSecret, then webhook by webhook its URL when it carries
// credentials (or is encrypted already) and each static header value (names sorted). It stops at f's first error, so that error is always the same one.
func (d *Destination) secretFields(f func(path string, v *string) error) error {
	s := &d.Settings
	for _, secret := range [...]struct {
		path string
		v    *string
	}{{"settings.sharedSecret", &s.SharedSecret}, {"settings.previousSharedSecret", &s.PreviousSharedSecret}} {
		if *secret.v != "" {
			if err := f(secret.path, secret.v); err != nil {
				return err
			}
		}
	}
	for i := range s.Webhooks {
		if u := &s.Webhooks[i].URL; strings.HasPrefix(*u, EncryptedPrefix) || URLHasCredentials(*u) {
			if err := f(fmt.Sprintf("settings.webhooks[%d].url", i), u); err != nil {
				return err
			}
		}
		for _, name := range slices.Sorted(maps.Keys(s.Webhooks[i].Headers)) {
			v := s.Webhooks[i].Headers[name]
			if err := f(fmt.Sprintf("settings.webhooks[%d].headers.%s", i, name), &v); err != nil {
				return err
			}
			s.Webhooks[i].Headers[name] = v
		}
	}
	return nil
}

// SealConfigRecord returns rec with its secrets encrypted by k (see the package's Secrets at
// rest): a destination record's sharedSecret, previousSharedSecret, static header values and
// URLs with credentials.
// Other records, tombstones, and every record when k is nil, are returned as they are.
func SealConfigRecord(rec ConfigRecord, k *Keyring) (ConfigRecord, error) {
	if k == nil || len(rec.Value) == 0 || !strings.HasPrefix(rec.Key, ConfigKeyDestination) {
		return rec, nil
	}
	var d Destination
	if err := json.Unmarshal(rec.Value, &d); err != nil {
		return ConfigRecord{}, fmt.Errorf("config record %s: %w", rec.Key, err)
	}
	err := d.secretFields(func(path string, v *string) error {
		if strings.HasPrefix(*v, EncryptedPrefix) {
			return nil // already sealed (a record read back and written again)
		}
		sealed, err := k.seal(rec.Key+" "+path, *v)
		*v = sealed
		return err
	})
	if err != nil {
		return ConfigRecord{}, fmt.Errorf("config record %s: encrypting: %w", rec.Key, err)
	}
	return marshalRecord(rec.Key, &d)
}

// NeedsSealing reports whether writing rec again with k would store its secrets differently:
// k is set, and rec is a destination record with a secret in clear or encrypted with a key
// other than k's first — written before the key was set, or before a rotation. Applying a
// config writes such records again even when nothing else changed, which is how records move
// to a new key. A value that does not decode needs sealing too.
func NeedsSealing(rec ConfigRecord, k *Keyring) bool {
	if k == nil || len(rec.Value) == 0 || !strings.HasPrefix(rec.Key, ConfigKeyDestination) {
		return false
	}
	var d Destination
	if err := json.Unmarshal(rec.Value, &d); err != nil {
		return true
	}
	current := EncryptedPrefix + k.primary + ":"
	errStale := errors.New("not sealed with the first key")
	return d.secretFields(func(_ string, v *string) error {
		if !strings.HasPrefix(*v, current) {
			return errStale
		}
		return nil
	}) != nil
}

// openSecrets decrypts the encrypted secrets of d, read from the record key; plain ones stay
// (records written before the key was set).
func (d *Destination) openSecrets(key string, k *Keyring) error {
	return d.secretFields(func(path string, v *string) error {
		if !strings.HasPrefix(*v, EncryptedPrefix) {
			return nil
		}
		plain, err := k.open(key+" "+path, *v)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		*v = plain
		return nil
	})
}
