package analytics

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// The encoder writes a message's JSON straight into a reusable buffer: no reflection for the
// common value types (strings, numbers, booleans, nil, maps and slices of them, time.Time),
// map keys in sorted order (stable payloads), and encoding/json only for other types.

// maxDepth bounds nesting, which also stops a map that contains itself.
const maxDepth = 64

// errTooDeep and errTooLarge end an encoding early.
var (
	errTooDeep  = errors.New("nested more than 64 levels (or contains itself)")
	errTooLarge = errors.New("too large")
)

// valueError is an encoding failure at a key path inside a map field.
type valueError struct {
	path string
	err  error
}

func (e *valueError) Error() string {
	if e.path == "" {
		return e.err.Error()
	}
	return "at " + strconv.Quote(e.path) + ": " + e.err.Error()
}

func (e *valueError) prefix(key string) *valueError {
	if e.path == "" {
		e.path = key
	} else {
		e.path = key + "." + e.path
	}
	return e
}

type encoder struct {
	buf   []byte
	limit int      // the encoding stops past this many bytes (checked between values)
	keys  []string // sort scratch, used as a stack by nested maps

	// random is a stock of crypto/rand bytes for messageIds, read 64 ids at a time.
	random  [64 * 16]byte
	randPos int
}

// newMessageID returns a random (version 4, RFC 4122 variant) UUID, as uuid.NewRandom does,
// but from the encoder's stock of random bytes: one crypto/rand read per 64 ids and no
// allocation.
func (e *encoder) newMessageID() (uuid.UUID, error) {
	if e.randPos == 0 || e.randPos == len(e.random) {
		if _, err := rand.Read(e.random[:]); err != nil {
			return uuid.Nil, err
		}
		e.randPos = 0
	}
	var id uuid.UUID
	copy(id[:], e.random[e.randPos:e.randPos+16])
	clear(e.random[e.randPos : e.randPos+16]) // an id is never handed out twice
	e.randPos += 16
	id[6] = id[6]&0x0f | 0x40 // version 4
	id[8] = id[8]&0x3f | 0x80 // variant 10
	return id, nil
}

// library is the context.library object every message carries.
var libraryJSON = `{"name":"` + LibraryName + `","version":"` + Version + `"}`

// encodeMessage writes m as JSON. id is its messageId; now stamps it when m has no Timestamp.
func (e *encoder) encodeMessage(m Message, id *[16]byte, now time.Time) *ValidationError {
	e.buf = e.buf[:0]
	var (
		typ, userID, anonymousID, ts string
		ctx                          map[string]any
		integrations                 Integrations
	)
	e.buf = append(e.buf, `{"type":"`...)
	switch m := m.(type) {
	case *Identify:
		typ, userID, anonymousID, ts, ctx, integrations = TypeIdentify, m.UserId, m.AnonymousId, m.Timestamp, m.Context, m.Integrations
		e.head(typ, id, userID, anonymousID)
		if err := e.mapField("traits", m.Traits); err != nil {
			return e.fieldError(typ, "traits", err)
		}
	case *Track:
		typ, userID, anonymousID, ts, ctx, integrations = TypeTrack, m.UserId, m.AnonymousId, m.Timestamp, m.Context, m.Integrations
		e.head(typ, id, userID, anonymousID)
		e.stringField("event", m.Event)
		if err := e.mapField("properties", m.Properties); err != nil {
			return e.fieldError(typ, "properties", err)
		}
	case *Page:
		typ, userID, anonymousID, ts, ctx, integrations = TypePage, m.UserId, m.AnonymousId, m.Timestamp, m.Context, m.Integrations
		e.head(typ, id, userID, anonymousID)
		e.stringField("name", m.Name)
		e.stringField("category", m.Category)
		if err := e.mapField("properties", m.Traits); err != nil {
			return e.fieldError(typ, "properties", err)
		}
	case *Screen:
		typ, userID, anonymousID, ts, ctx, integrations = TypeScreen, m.UserId, m.AnonymousId, m.Timestamp, m.Context, m.Integrations
		e.head(typ, id, userID, anonymousID)
		e.stringField("name", m.Name)
		e.stringField("category", m.Category)
		if err := e.mapField("properties", m.Traits); err != nil {
			return e.fieldError(typ, "properties", err)
		}
	case *Group:
		typ, userID, anonymousID, ts, ctx, integrations = TypeGroup, m.UserId, m.AnonymousId, m.Timestamp, m.Context, m.Integrations
		e.head(typ, id, userID, anonymousID)
		e.stringField("groupId", m.GroupId)
		if err := e.mapField("traits", m.Traits); err != nil {
			return e.fieldError(typ, "traits", err)
		}
	case *Alias:
		typ, userID, ts, ctx, integrations = TypeAlias, m.UserId, m.Timestamp, m.Context, m.Integrations
		e.head(typ, id, userID, "")
		e.stringField("previousId", m.PreviousId)
	default:
		return &ValidationError{Type: "unknown", Reason: "not a message of this package"}
	}

	e.buf = append(e.buf, `,"timestamp":"`...)
	if ts == "" {
		e.buf = appendTime(e.buf, now)
	} else {
		if !validTimestamp(ts) {
			return &ValidationError{Type: typ, Field: "timestamp", Reason: strconv.Quote(ts) + " is not an ISO 8601 date-time such as 2024-05-01T10:00:00.000Z"}
		}
		e.buf = append(e.buf, ts...) // as given; validTimestamp admits no character to escape
	}
	e.buf = append(e.buf, `","context":{"library":`...)
	e.buf = append(e.buf, libraryJSON...)
	if err := e.members(ctx, true, true, 1); err != nil {
		return e.fieldError(typ, "context", err)
	}
	e.buf = append(e.buf, '}')
	if len(integrations) > 0 {
		if err := e.mapField("integrations", integrations); err != nil {
			return e.fieldError(typ, "integrations", err)
		}
	}
	e.buf = append(e.buf, '}')
	if len(e.buf) > e.limit {
		return tooLarge(typ, len(e.buf), e.limit)
	}
	return nil
}

func (e *encoder) fieldError(typ, field string, err error) *ValidationError {
	if errors.Is(err, errTooLarge) {
		return tooLarge(typ, 0, e.limit)
	}
	return &ValidationError{Type: typ, Field: field, Reason: err.Error()}
}

// tooLarge is the refusal of an oversized message. It is a *ValidationError whose Reason
// mentions the limit; errors.Is(err, ErrMessageTooLarge) holds for it.
func tooLarge(typ string, size, limit int) *ValidationError {
	r := "larger than " + strconv.Itoa(limit) + " bytes"
	if size > 0 {
		r = strconv.Itoa(size) + " bytes, more than the limit of " + strconv.Itoa(limit)
	}
	return &ValidationError{Type: typ, Reason: r, tooLarge: true}
}

func (e *encoder) head(typ string, id *[16]byte, userID, anonymousID string) {
	e.buf = append(e.buf, typ...)
	e.buf = append(e.buf, `","messageId":"`...)
	e.buf = appendUUID(e.buf, id)
	e.buf = append(e.buf, '"')
	e.stringField("userId", userID)
	e.stringField("anonymousId", anonymousID)
}

func (e *encoder) stringField(name, v string) {
	if v == "" {
		return
	}
	e.buf = append(e.buf, ',', '"')
	e.buf = append(e.buf, name...)
	e.buf = append(e.buf, '"', ':')
	e.buf = appendString(e.buf, v)
}

func (e *encoder) mapField(name string, m map[string]any) error {
	if len(m) == 0 {
		return nil
	}
	e.buf = append(e.buf, ',', '"')
	e.buf = append(e.buf, name...)
	e.buf = append(e.buf, '"', ':')
	return e.object(m, 1)
}

func (e *encoder) object(m map[string]any, depth int) error {
	e.buf = append(e.buf, '{')
	if err := e.members(m, false, false, depth); err != nil {
		return err
	}
	e.buf = append(e.buf, '}')
	return nil
}

// members writes "key":value for every key of m, in key order, separated by commas and
// preceded by one when comma is set; skipLibrary leaves out "library" (context, where the
// library writes its own).
func (e *encoder) members(m map[string]any, skipLibrary, comma bool, depth int) error {
	if len(m) == 0 {
		return nil
	}
	if depth > maxDepth {
		return &valueError{err: errTooDeep}
	}
	start := len(e.keys)
	for k := range m {
		if !skipLibrary || k != "library" {
			e.keys = append(e.keys, k)
		}
	}
	ks := e.keys[start:]
	slices.Sort(ks)
	defer func() {
		clear(ks) // do not keep the caller's strings alive in the pool
		e.keys = e.keys[:start]
	}()
	for i, k := range ks {
		if comma || i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = appendString(e.buf, k)
		e.buf = append(e.buf, ':')
		if err := e.value(m[k], depth+1); err != nil {
			var ve *valueError
			if errors.As(err, &ve) {
				return ve.prefix(k)
			}
			return err
		}
		if len(e.buf) > e.limit {
			return errTooLarge
		}
	}
	return nil
}

func (e *encoder) value(v any, depth int) error {
	switch v := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case string:
		e.buf = appendString(e.buf, v)
	case bool:
		e.buf = strconv.AppendBool(e.buf, v)
	case int:
		e.buf = strconv.AppendInt(e.buf, int64(v), 10)
	case int64:
		e.buf = strconv.AppendInt(e.buf, v, 10)
	case int32:
		e.buf = strconv.AppendInt(e.buf, int64(v), 10)
	case int16:
		e.buf = strconv.AppendInt(e.buf, int64(v), 10)
	case int8:
		e.buf = strconv.AppendInt(e.buf, int64(v), 10)
	case uint:
		e.buf = strconv.AppendUint(e.buf, uint64(v), 10)
	case uint64:
		e.buf = strconv.AppendUint(e.buf, v, 10)
	case uint32:
		e.buf = strconv.AppendUint(e.buf, uint64(v), 10)
	case uint16:
		e.buf = strconv.AppendUint(e.buf, uint64(v), 10)
	case uint8:
		e.buf = strconv.AppendUint(e.buf, uint64(v), 10)
	case float64:
		return e.float(v, 64)
	case float32:
		return e.float(float64(v), 32)
	case json.Number:
		if !json.Valid([]byte(v)) {
			return &valueError{err: errors.New("invalid json.Number " + strconv.Quote(string(v)))}
		}
		e.buf = append(e.buf, v...)
	case time.Time:
		e.buf = append(e.buf, '"')
		e.buf = appendTime(e.buf, v)
		e.buf = append(e.buf, '"')
	case map[string]any:
		return e.object(v, depth)
	case Integrations:
		return e.object(v, depth)
	case map[string]string:
		if depth > maxDepth {
			return &valueError{err: errTooDeep}
		}
		e.buf = append(e.buf, '{')
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = appendString(e.buf, k)
			e.buf = append(e.buf, ':')
			e.buf = appendString(e.buf, v[k])
		}
		e.buf = append(e.buf, '}')
	case []any:
		if depth > maxDepth {
			return &valueError{err: errTooDeep}
		}
		e.buf = append(e.buf, '[')
		for i, x := range v {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.value(x, depth+1); err != nil {
				var ve *valueError
				if errors.As(err, &ve) {
					return ve.prefix(strconv.Itoa(i))
				}
				return err
			}
			if len(e.buf) > e.limit {
				return errTooLarge
			}
		}
		e.buf = append(e.buf, ']')
	case []string:
		e.buf = append(e.buf, '[')
		for i, x := range v {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = appendString(e.buf, x)
		}
		e.buf = append(e.buf, ']')
	case json.RawMessage:
		if !json.Valid(v) {
			return &valueError{err: errors.New("invalid json.RawMessage")}
		}
		e.buf = append(e.buf, v...)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return &valueError{err: err}
		}
		e.buf = append(e.buf, b...)
	}
	return nil
}

// float writes f as encoding/json does.
func (e *encoder) float(f float64, bits int) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return &valueError{err: errors.New("unsupported value " + strconv.FormatFloat(f, 'g', -1, bits))}
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	e.buf = strconv.AppendFloat(e.buf, f, format, -1, bits)
	if format == 'e' { // clean up e-09 to e-9
		n := len(e.buf)
		if n >= 4 && e.buf[n-4] == 'e' && e.buf[n-3] == '-' && e.buf[n-2] == '0' {
			e.buf[n-2] = e.buf[n-1]
			e.buf = e.buf[:n-1]
		}
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string: invalid UTF-8 becomes U+FFFD, control characters
// and U+2028/U+2029 are escaped.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendUUID writes id in the canonical 8-4-4-4-12 form.
func appendUUID(dst []byte, id *[16]byte) []byte {
	for i, b := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hexDigits[b>>4], hexDigits[b&0xF])
	}
	return dst
}

// appendTime writes t as RFC 3339 in UTC with milliseconds: 2024-05-01T10:00:00.000Z.
func appendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 { // beyond four digits: let the time package write it
		return t.AppendFormat(dst, "2006-01-02T15:04:05.000Z07:00")
	}
	hour, minute, sec := t.Clock()
	ms := t.Nanosecond() / int(time.Millisecond)
	return append(dst,
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+int(month)/10), byte('0'+int(month)%10), '-',
		byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':',
		byte('0'+minute/10), byte('0'+minute%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), '.',
		byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
}

// Time formats t the way the library sends timestamps (RFC 3339, UTC, milliseconds), for a
// message's Timestamp field: Timestamp: analytics.Time(order.PlacedAt).
func Time(t time.Time) string {
	return string(appendTime(make([]byte, 0, 24), t))
}

// validTimestamp reports whether s is an ISO 8601 / RFC 3339 date-time that ingest accepts:
// "Z" or a ±hh:mm offset (or ±hhmm), 0 to 9 fractional digits.
func validTimestamp(s string) bool {
	if len(s) > 19 && s[19] == '.' {
		n := 20
		for n < len(s) && s[n] >= '0' && s[n] <= '9' {
			n++
		}
		if n-20 > 9 {
			return false
		}
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	if n := len(s); n > 5 && (s[n-5] == '+' || s[n-5] == '-') && allDigits(s[n-4:]) {
		if _, err := time.Parse("2006-01-02T15:04:05.999999999-0700", s); err == nil {
			return true
		}
	}
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
