package deliverer

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"slices"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/tributary-cdp/tributary/schemas"
)

// What a POST keeps of the endpoint's answer for the attempt log (docs/delivery.md#attempt-log-and-metrics):
// its headers and the first schemas.MaxAnswerBody bytes of its body, written on the attempt
// record as responseHeaders and responseBody (docs/topics.md#webhooksattempts). Both HTTP
// clients fill it while they read the answer (they read at most maxAnswerBytes of it anyway);
// its buffers come from a pool and go back once the attempt is logged, so that capturing costs
// no allocation per POST once they grew.

// answer is the captured answer of one POST.
type answer struct {
	// headers is the JSON object of the kept headers (sorted by name, as encoding/json writes
	// a map), empty when the answer had none or there was no answer.
	headers []byte
	// body is the first schemas.MaxAnswerBody bytes of the body (decompressed when gzip).
	body []byte

	// scratch for the headers while they are read: names and values back to back.
	raw   []byte
	pairs []answerHeader
}

// answerHeader is one header in answer.raw: name raw[n0:n1], value raw[n1:v1].
type answerHeader struct{ n0, n1, v1 int }

var answerPool = sync.Pool{New: func() any { return &answer{body: make([]byte, 0, schemas.MaxAnswerBody)} }}

// newAnswer is an empty answer from the pool.
func newAnswer() *answer { return answerPool.Get().(*answer) }

// release returns a to the pool; nil is ignored.
func (a *answer) release() {
	if a == nil {
		return
	}
	a.reset()
	answerPool.Put(a)
}

// reset empties a, keeping its buffers; nil is ignored.
func (a *answer) reset() {
	if a == nil {
		return
	}
	a.headers, a.body, a.raw, a.pairs = a.headers[:0], a.body[:0], a.raw[:0], a.pairs[:0]
}

// addHeader notes one header of the answer (name canonical); the caller calls endHeaders once
// every header was added.
func (a *answer) addHeader(name, value []byte) {
	n0 := len(a.raw)
	a.raw = append(a.raw, name...)
	n1 := len(a.raw)
	a.raw = append(a.raw, value[:min(len(value), schemas.MaxAnswerHeaderValue)]...)
	a.pairs = append(a.pairs, answerHeader{n0, n1, len(a.raw)})
}

// endHeaders writes the headers noted as a JSON object: sorted by name, the first value of a
// repeated name, at most schemas.MaxAnswerHeaders of them.
func (a *answer) endHeaders() {
	if len(a.pairs) == 0 {
		return
	}
	name := func(h answerHeader) []byte { return a.raw[h.n0:h.n1] }
	slices.SortStableFunc(a.pairs, func(x, y answerHeader) int { return bytes.Compare(name(x), name(y)) })
	b := append(a.headers[:0], '{')
	kept := 0
	for i, h := range a.pairs {
		if i > 0 && bytes.Equal(name(h), name(a.pairs[i-1])) {
			continue
		}
		if kept == schemas.MaxAnswerHeaders {
			break
		}
		if kept > 0 {
			b = append(b, ',')
		}
		b = schemas.AppendJSONString(b, text(name(h)))
		b = append(b, ':')
		b = schemas.AppendJSONString(b, text(trimRune(a.raw[h.n1:h.v1])))
		kept++
	}
	a.headers = append(b, '}')
}

// addHTTPHeaders notes net/http's headers of an answer.
func (a *answer) addHTTPHeaders(h http.Header) {
	for name, values := range h {
		if len(values) > 0 {
			a.addHeader([]byte(name), []byte(values[0]))
		}
	}
	a.endHeaders()
}

// readBody reads the first schemas.MaxAnswerBody bytes of the body r into a.body: through
// gzip when the answer's Content-Encoding is gzip (what the lean client asked for, as net/http
// does, and net/http would undo). The caller reads (or drops) the rest of r itself.
func (a *answer) readBody(r io.Reader, gzipped bool) error {
	if gzipped {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil // not what it says it is: kept as nothing
		}
		r = zr
	}
	n, err := io.ReadFull(r, a.body[:schemas.MaxAnswerBody])
	a.body = a.body[:n]
	if gzipped || err == io.EOF || err == io.ErrUnexpectedEOF {
		return nil // a gzip stream's errors are not the connection's
	}
	return err
}

// emptySuccess reports whether an answer of this status, whose body has this length (a
// negative length: not known before it is read), is an empty 2xx: its attempt record keeps
// nothing of it, neither headers nor body (docs/topics.md#webhooksattempts). That is most
// answers, and the attempt record stays small where it is written, sealed, fetched and read
// the most.
func emptySuccess(status, length int) bool { return status >= 200 && status < 300 && length == 0 }

// appendTo appends the answer's members of an attempt record (responseHeaders, responseBody),
// those it has; nothing for an empty 2xx (emptySuccess).
func (a *answer) appendTo(b []byte, status int) []byte {
	if !a.kept(status) {
		return b
	}
	if len(a.headers) > 0 {
		b = append(b, `,"responseHeaders":`...)
		b = append(b, a.headers...)
	}
	if len(a.body) > 0 {
		b = append(b, `,"responseBody":`...)
		b = schemas.AppendJSONString(b, text(trimRune(a.body)))
	}
	return b
}

// kept reports whether an attempt record of this answer (with its status) holds any of it
// (appendTo): not for an empty 2xx, nor for an answer with neither headers nor body.
func (a *answer) kept(status int) bool {
	return a != nil && !emptySuccess(status, len(a.body)) && (len(a.headers) > 0 || len(a.body) > 0)
}

// trimRune drops an incomplete UTF-8 sequence a truncation left at the end of b, so the text
// ends on a whole character rather than on a U+FFFD.
func trimRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < utf8.RuneSelf {
			return b // ASCII: complete
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}

// text views b as a string for a call that does not keep it (schemas.AppendJSONString): the
// answer's bytes are copied into the record, never a string of their own.
func text(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
