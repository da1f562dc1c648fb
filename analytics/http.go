package analytics

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
)

// httpTransport POSTs batches to the tracking API's /v1/batch.
type httpTransport struct {
	url           string
	authHeader    []string // {"Basic " + base64(writeKey + ":")}
	client        *http.Client
	owned         bool // the client is ours: Close closes its idle connections
	compressAbove int
	gz            sync.Pool // *gzipBuf
	scratch       sync.Pool // *[]byte for response bodies
}

type gzipBuf struct {
	w   *gzip.Writer
	buf bytes.Buffer
}

const userAgent = LibraryName + "/" + Version

var (
	headerJSON      = []string{"application/json"}
	headerUserAgent = []string{userAgent}
	headerGzip      = []string{"gzip"}
)

// maxResponseBytes caps how much of an answer is read.
const maxResponseBytes = 64 << 10

func newHTTPTransport(cfg config, client *http.Client, writeKey string) *httpTransport {
	t := &httpTransport{
		url:           cfg.url,
		authHeader:    []string{"Basic " + base64.StdEncoding.EncodeToString([]byte(writeKey+":"))},
		client:        client,
		compressAbove: cfg.compressAbove,
	}
	if t.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = max(cfg.concurrency, 2)
		// Headers and a body of up to 64 KiB leave in one write (the default buffer, 4 KiB,
		// sends every batch in two or more).
		tr.WriteBufferSize = 64 << 10
		t.client = &http.Client{Timeout: 10 * time.Second, Transport: tr}
		t.owned = true
	}
	t.scratch.New = func() any { b := make([]byte, 0, 512); return &b }
	return t
}

func (t *httpTransport) send(ctx context.Context, b *batch, todo []int32) ([]int32, error) {
	body := b.withTail(time.Now())
	var gz *gzipBuf
	if t.compressAbove > 0 && len(body) >= t.compressAbove {
		gz = t.gzip(body)
		defer t.gz.Put(gz)
		body = gz.buf.Bytes()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		fail(b, todo, fmt.Errorf("analytics: building the request: %w", err))
		return nil, nil
	}
	// The header values are shared, read-only slices: net/http never modifies them.
	req.Header["Content-Type"] = headerJSON
	req.Header["User-Agent"] = headerUserAgent
	req.Header["Authorization"] = t.authHeader
	if gz != nil {
		req.Header["Content-Encoding"] = headerGzip
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return todo, fmt.Errorf("analytics: posting a batch: %w", err) // network: retry
	}
	defer resp.Body.Close()
	sp := t.scratch.Get().(*[]byte)
	defer t.scratch.Put(sp)
	answer := readCapped(resp.Body, (*sp)[:0])
	*sp = answer[:0]

	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		if bytes.Contains(answer, []byte(`"rejected"`)) {
			var r struct {
				Rejected []struct {
					Index  int    `json:"index"`
					Code   string `json:"code"`
					Reason string `json:"reason"`
				} `json:"rejected"`
			}
			if json.Unmarshal(answer, &r) == nil {
				for _, rj := range r.Rejected {
					if rj.Index >= 0 && rj.Index < len(b.refs) {
						b.refs[rj.Index].err = &RejectedError{Code: rj.Code, Reason: rj.Reason}
					}
				}
			}
		}
		return nil, nil
	case s == http.StatusTooManyRequests || s == http.StatusRequestTimeout || s >= 500:
		herr := &HTTPError{Status: s, Body: snippet(answer)}
		if d, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			return todo, &RetryAfterError{Err: herr, Wait: d}
		}
		return todo, herr
	default: // other 4xx (and 1xx/3xx): retrying cannot help
		fail(b, todo, &HTTPError{Status: s, Body: snippet(answer)})
		return nil, nil
	}
}

func (t *httpTransport) gzip(body []byte) *gzipBuf {
	g, _ := t.gz.Get().(*gzipBuf)
	if g == nil {
		g = new(gzipBuf)
		g.w, _ = gzip.NewWriterLevel(&g.buf, gzip.BestSpeed)
	}
	g.buf.Reset()
	g.w.Reset(&g.buf)
	_, _ = g.w.Write(body) // writes to a bytes.Buffer do not fail
	_ = g.w.Close()
	return g
}

// readCapped appends at most maxResponseBytes of r to buf and drains the rest, so that the
// connection can be reused.
func readCapped(r io.Reader, buf []byte) []byte {
	for len(buf) < maxResponseBytes {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), maxResponseBytes)])
		buf = buf[:len(buf)+n]
		if err != nil {
			return buf
		}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(r, 1<<20))
	return buf
}

func snippet(b []byte) string {
	const n = 512
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(bytes.TrimSpace(b))
}

func (t *httpTransport) close() error {
	if t.owned {
		t.client.CloseIdleConnections()
	}
	return nil
}
