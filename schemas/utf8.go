package schemas

import (
	"unicode/utf8"
)

// ValidUTF8 returns b with every byte that is not part of a valid UTF-8 sequence replaced by
// U+FFFD, the rule encoding/json applies when it decodes a string; b itself when it is valid
// (the common case: no copy). Ingest applies it to every message as it arrives, so that every
// string — userId, event, property and trait values, keys, the Kafka key — follows one rule and
// a webhook body is always valid JSON.
func ValidUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, b[:size]...)
		}
		b = b[size:]
	}
	return out
}
