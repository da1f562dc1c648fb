package schemas

import (
	"crypto/sha256"
	"encoding/hex"
)

// WriteKeyHashPrefix starts every write-key hash: "sha256:" then 64 lower-case hex digits.
const WriteKeyHashPrefix = "sha256:"

// HashWriteKey returns the at-rest form of a write key: "sha256:" followed by the lower-case
// hex SHA-256 of the key's bytes. Write keys are random bearer tokens, not passwords, so a
// plain (unsalted) hash is enough to keep them out of the config topic while still letting
// ingest look a presented key up by its hash.
func HashWriteKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return WriteKeyHashPrefix + hex.EncodeToString(sum[:])
}

// KeyHash returns the source's write-key hash: WriteKeyHash when set, else
// HashWriteKey(WriteKey), or "" when the source has neither.
func (s *Source) KeyHash() string {
	switch {
	case s.WriteKeyHash != "":
		return s.WriteKeyHash
	case s.WriteKey != "":
		return HashWriteKey(s.WriteKey)
	default:
		return ""
	}
}

// validWriteKeyHash reports whether h is "sha256:" followed by exactly 64 lower-case hex digits.
func validWriteKeyHash(h string) bool {
	if len(h) != len(WriteKeyHashPrefix)+64 || h[:len(WriteKeyHashPrefix)] != WriteKeyHashPrefix {
		return false
	}
	for _, c := range []byte(h[len(WriteKeyHashPrefix):]) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// validWriteKey reports whether k can be an HTTP Basic user name: printable ASCII other than
// space and ':' (the user:password separator).
func validWriteKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range []byte(k) {
		if c <= ' ' || c >= 0x7f || c == ':' {
			return false
		}
	}
	return true
}
