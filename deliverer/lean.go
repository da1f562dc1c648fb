package deliverer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http/httpguts"

	"github.com/tributary-cdp/tributary/schemas"
)

// The lean HTTP/1.1 client (docs/delivery.md#http-client). net/http costs about 70 allocations
// and a transport-wide lock (its idle-connection pool) per POST; this client writes the request
// itself into a per-connection buffer, parses the answer with fasthttp's zero-allocation
// parser, and keeps its idle connections in one pool per host, so that a POST allocates nearly
// nothing. It sends the same bytes as net/http would (request line, Host, User-Agent,
// Content-Length, the other headers sorted by name, Accept-Encoding: gzip), and keeps every
// guarantee of the net/http client: the address guard at dial time, the same TLS settings,
// DELIVERY_TIMEOUT over the whole POST, a stale keep-alive connection retried at once on a new
// one, no redirect followed, no proxy.
//
// It sends only what it can send exactly as net/http would; the rest (an HTTPS host that
// chose HTTP/2, a URL with user info, a non-ASCII or zoned host, more static headers than a
// valid config holds) is answered errUseStd, and net/http sends it.

const (
	// maxAnswerBytes is how much of an answer's body is read; a longer body closes the
	// connection instead of being read to its end.
	maxAnswerBytes = 64 << 10
	// idleConnTimeout closes a connection idle that long.
	idleConnTimeout = 90 * time.Second
	// connBufferSize is the read and write buffer of a connection: an answer whose header
	// block is longer is parsed by net/http instead (readLargeAnswer).
	connBufferSize = 4 << 10
	// maxAnswerHeaderBytes bounds an answer's header block, as net/http's
	// Transport.MaxResponseHeaderBytes does by default.
	maxAnswerHeaderBytes = 10 << 20
	// maxLeanHeaders bounds the headers of one request on the lean path: a valid config's 20
	// static headers and Tributary's 6.
	maxLeanHeaders = 32
)

var (
	// errUseStd: the lean client does not send this POST; net/http does (webhookClient).
	errUseStd = errors.New("deliverer: POST left to net/http")
	// errClientClosed: the client was closed (the deliverer is stopping).
	errClientClosed = errors.New("the deliverer's HTTP client is closed")
)

// gzipToken is the Content-Encoding of a gzip answer.
var gzipToken = []byte("gzip")

// aLongTimeAgo is a deadline in the past: it interrupts the I/O in progress on a connection.
var aLongTimeAgo = time.Unix(1, 0)

// leanClient is the lean HTTP/1.1 client. It is safe for concurrent use. Its cleaner goroutine
// starts with the first connection and ends with close; the end of stop closes every connection
// at once, idle or in use, so a POST in progress ends with it.
type leanClient struct {
	dial           func(ctx context.Context, network, addr string) (net.Conn, error)
	tls            *tls.Config // offers h2 too: a host that picks it is left to net/http (hostPool.dial)
	maxIdlePerHost int
	stop           context.Context

	targets sync.Map // URL → *target

	mu     sync.Mutex
	pools  map[string]*hostPool // "scheme host:port" → pool
	closed bool

	cleanerOnce sync.Once
	closeOnce   sync.Once
	done        chan struct{} // closed by close: the cleaner ends
	cleanerDone chan struct{}
}

func newLeanClient(dial func(ctx context.Context, network, addr string) (net.Conn, error), tlsConfig *tls.Config, maxIdlePerHost int, stop context.Context) *leanClient {
	tc := tlsConfig.Clone()
	tc.NextProtos = []string{"h2", "http/1.1"}
	return &leanClient{dial: dial, tls: tc, maxIdlePerHost: maxIdlePerHost, stop: stop,
		pools: map[string]*hostPool{}, done: make(chan struct{}), cleanerDone: make(chan struct{})}
}

// target is what the lean client knows of one URL.
type target struct {
	pool       *hostPool // nil: net/http sends it
	requestURI string    // as net/http writes it: url.URL.RequestURI
	host       string    // the Host header
}

func (c *leanClient) target(raw string) *target {
	if t, ok := c.targets.Load(raw); ok {
		return t.(*target)
	}
	t, _ := c.targets.LoadOrStore(raw, c.parse(raw))
	return t.(*target)
}

// parse returns raw's target; its pool is nil when net/http should send it: an invalid URL
// (net/http says why), a scheme other than http and https, user info (net/http turns it into
// an Authorization header), a host net/http would rewrite (IDNA, an IPv6 zone, an empty port)
// or refuse.
func (c *leanClient) parse(raw string) *target {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Opaque != "" ||
		u.Host == "" || strings.HasSuffix(u.Host, ":") || strings.Contains(u.Host, "%") ||
		!isASCII(u.Host) || !httpguts.ValidHostHeader(u.Host) {
		return &target{}
	}
	ruri := u.RequestURI()
	if strings.ContainsFunc(ruri, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return &target{}
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	key := u.Scheme + " " + addr
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pools[key]
	if p == nil {
		p = &hostPool{c: c, addr: addr, open: map[*leanConn]struct{}{}, closed: c.closed}
		if u.Scheme == "https" {
			p.tls = c.tls.Clone()
			p.tls.ServerName = addr[:strings.LastIndex(addr, ":")] // as net/http: "[::1]" for an IPv6 address
		}
		c.pools[key] = p
	}
	return &target{pool: p, requestURI: ruri, host: u.Host}
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// send is poster.send. It returns errUseStd for a POST net/http must send.
func (c *leanClient) send(ctx context.Context, m message, deadline time.Time) (status int, retryAfter string, err error) {
	t := c.target(m.url)
	if t.pool == nil || t.pool.h2.Load() {
		return 0, "", errUseStd
	}
	var h headerList
	if err := h.build(&m); err != nil {
		return 0, "", err
	}
	if h.n > maxLeanHeaders {
		return 0, "", errUseStd
	}
	if err := ctx.Err(); err != nil {
		return 0, "", &url.Error{Op: "Post", URL: m.url, Err: err}
	}
	for fresh := false; ; fresh = true {
		var cn *leanConn
		if cn, err = t.pool.get(ctx, deadline, fresh); err != nil {
			break
		}
		reused := cn.used
		var stale bool
		m.answer.reset() // a stale connection's first try may have noted something
		status, retryAfter, stale, err = cn.roundTrip(ctx, t, &h, m.body, m.answer, deadline)
		// A keep-alive connection the server had closed (its idle timeout) fails before any
		// answer: the POST goes again at once, once, on a new connection (what net/http does
		// for a replayable request). X-Message-Id makes a second delivery harmless.
		if err == nil || !stale || !reused || fresh || ctx.Err() != nil || c.stop.Err() != nil || !time.Now().Before(deadline) {
			break
		}
	}
	if err == nil || errors.Is(err, errUseStd) {
		return status, retryAfter, err
	}
	switch {
	case ctx.Err() != nil:
		err = ctx.Err()
	case c.stop.Err() != nil:
		err = c.stop.Err()
	case errors.Is(err, fasthttp.ErrTimeout):
		err = os.ErrDeadlineExceeded // a net.Error whose Timeout() is true, as Classify expects
	}
	return 0, "", &url.Error{Op: "Post", URL: m.url, Err: err}
}

// close stops the cleaner and closes every connection. Later POSTs fail.
func (c *leanClient) close() {
	c.cleanerOnce.Do(func() { close(c.cleanerDone) }) // never started: nothing to wait for
	c.closeOnce.Do(func() { close(c.done) })
	<-c.cleanerDone
	c.closeAll()
}

func (c *leanClient) startCleaner() {
	c.cleanerOnce.Do(func() { go c.clean() })
}

// clean closes the connections idle for idleConnTimeout, and every connection when stop ends.
func (c *leanClient) clean() {
	defer close(c.cleanerDone)
	tick := time.NewTicker(idleConnTimeout / 9)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-c.stop.Done():
			c.closeAll()
			return
		case now := <-tick.C:
			for _, p := range c.poolList() {
				p.closeIdle(now)
			}
		}
	}
}

func (c *leanClient) poolList() []*hostPool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := make([]*hostPool, 0, len(c.pools))
	for _, p := range c.pools {
		ps = append(ps, p)
	}
	return ps
}

func (c *leanClient) closeAll() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	for _, p := range c.poolList() {
		p.closeAll()
	}
}

// hostPool holds the connections to one scheme and host:port.
type hostPool struct {
	c    *leanClient
	addr string      // host:port, dialled through the guard
	tls  *tls.Config // nil: http
	// h2: the host chose HTTP/2 when offered it (ALPN): net/http sends its POSTs.
	h2 atomic.Bool

	mu     sync.Mutex
	idle   []*leanConn // by last use: the most recent last
	open   map[*leanConn]struct{}
	closed bool
}

// get returns an idle connection (the most recently used), or a new one when there is none or
// fresh.
func (p *hostPool) get(ctx context.Context, deadline time.Time, fresh bool) (*leanConn, error) {
	if !fresh {
		now := time.Now()
		p.mu.Lock()
		if n := len(p.idle); n > 0 {
			cn := p.idle[n-1]
			p.idle[n-1] = nil
			p.idle = p.idle[:n-1]
			if now.Sub(cn.lastUse) < idleConnTimeout {
				p.mu.Unlock()
				return cn, nil
			}
			// The most recent is too old: so are the others (the cleaner closes them).
			delete(p.open, cn)
			p.mu.Unlock()
			_ = cn.Conn.Close()
		} else {
			p.mu.Unlock()
		}
	}
	return p.dial(ctx, deadline)
}

// dial opens a connection through the guarded dialer, with TLS for https. A TLS host that
// picks HTTP/2 (offered beside http/1.1) is marked h2 and the connection dropped: errUseStd.
func (p *hostPool) dial(ctx context.Context, deadline time.Time) (*leanConn, error) {
	p.c.startCleaner()
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	conn, err := p.c.dial(dctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	if p.tls != nil {
		tc := tls.Client(conn, p.tls)
		_ = conn.SetDeadline(deadline)
		if err := tc.HandshakeContext(dctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		if tc.ConnectionState().NegotiatedProtocol == "h2" {
			p.h2.Store(true)
			_ = tc.Close()
			return nil, errUseStd
		}
		conn = tc
	}
	cn := &leanConn{Conn: conn, pool: p, br: bufio.NewReaderSize(conn, connBufferSize), bw: bufio.NewWriterSize(conn, connBufferSize)}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = conn.Close()
		return nil, errClientClosed
	}
	p.open[cn] = struct{}{}
	p.mu.Unlock()
	return cn, nil
}

// put keeps cn for the next POST, unless the host has maxIdlePerHost idle already.
func (p *hostPool) put(cn *leanConn) {
	cn.used, cn.lastUse = true, time.Now()
	p.mu.Lock()
	if p.closed || len(p.idle) >= p.c.maxIdlePerHost {
		p.mu.Unlock()
		cn.close()
		return
	}
	p.idle = append(p.idle, cn)
	p.mu.Unlock()
}

func (p *hostPool) closeIdle(now time.Time) {
	p.mu.Lock()
	i := 0
	for i < len(p.idle) && now.Sub(p.idle[i].lastUse) >= idleConnTimeout {
		i++
	}
	old := append([]*leanConn(nil), p.idle[:i]...)
	n := copy(p.idle, p.idle[i:])
	clear(p.idle[n:])
	p.idle = p.idle[:n]
	for _, cn := range old {
		delete(p.open, cn)
	}
	p.mu.Unlock()
	for _, cn := range old {
		_ = cn.Conn.Close()
	}
}

func (p *hostPool) closeAll() {
	p.mu.Lock()
	p.closed = true
	all := make([]*leanConn, 0, len(p.open))
	for cn := range p.open {
		all = append(all, cn)
	}
	clear(p.idle)
	p.idle = p.idle[:0]
	p.mu.Unlock()
	for _, cn := range all {
		_ = cn.Conn.Close() // a POST in progress on it fails at once
	}
}

// leanConn is one connection with its buffers.
type leanConn struct {
	net.Conn
	pool    *hostPool
	br      *bufio.Reader
	bw      *bufio.Writer
	body    io.LimitedReader // reads ≤ maxAnswerBytes of an answer's body
	lastUse time.Time
	used    bool // it carried a POST already: it may be stale
}

func (cn *leanConn) close() {
	p := cn.pool
	p.mu.Lock()
	delete(p.open, cn)
	p.mu.Unlock()
	_ = cn.Conn.Close()
}

// roundTrip sends one POST on cn and reads its answer, all before deadline, then returns cn
// to its pool or closes it, keeping what a asks of the answer (nil: nothing). stale reports a
// failure before any byte of an answer that a connection closed by the server explains: the
// write failed, or the answer's first read did.
func (cn *leanConn) roundTrip(ctx context.Context, t *target, h *headerList, body []byte, a *answer, deadline time.Time) (status int, retryAfter string, stale bool, err error) {
	if err := cn.SetDeadline(deadline); err != nil {
		cn.close()
		return 0, "", true, err
	}
	interrupted := func() bool { return false }
	if ctx.Done() != nil && ctx != cn.pool.c.stop {
		// The client's own stop context closes the connections; another one interrupts this
		// POST's I/O. Once it did, the connection is not reused: its deadline is spoilt.
		stop := context.AfterFunc(ctx, func() { _ = cn.SetDeadline(aLongTimeAgo) })
		interrupted = func() bool { return !stop() }
	}
	if err := cn.writeRequest(t, h, body); err != nil {
		interrupted()
		cn.close()
		var ne net.Error
		return 0, "", !(errors.As(err, &ne) && ne.Timeout()), err
	}
	status, retryAfter, keep, err := cn.readAnswer(a)
	if interrupted() || err != nil {
		cn.close()
		return status, retryAfter, err == io.EOF, err // io.EOF: fasthttp's "no byte of an answer"
	}
	// Bytes after the answer were not asked for: the connection is not kept.
	if keep && !h.close && cn.br.Buffered() == 0 {
		cn.pool.put(cn)
	} else {
		cn.close()
	}
	return status, retryAfter, false, nil
}

// writeRequest writes the POST as net/http's Request.Write does for HTTP/1.1.
func (cn *leanConn) writeRequest(t *target, h *headerList, body []byte) error {
	bw := cn.bw
	bw.WriteString("POST ")
	bw.WriteString(t.requestURI)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(t.host)
	bw.WriteString("\r\nUser-Agent: " + UserAgent + "\r\nContent-Length: ")
	bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(len(body)), 10))
	bw.WriteString("\r\n")
	for i := range h.n {
		bw.WriteString(h.kv[i].name)
		bw.WriteString(": ")
		bw.WriteString(textproto.TrimString(h.kv[i].value))
		bw.WriteString("\r\n")
	}
	if h.gzip {
		bw.WriteString("Accept-Encoding: gzip\r\n")
	}
	bw.WriteString("\r\n")
	bw.Write(body)
	return bw.Flush()
}

// readAnswer reads the answer's status line and headers, and at most maxAnswerBytes of its
// body, of which a (nil: nothing) keeps the headers and the first schemas.MaxAnswerBody bytes.
// keep: the connection may carry the next POST.
func (cn *leanConn) readAnswer(a *answer) (status int, retryAfter string, keep bool, err error) {
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	resp.StreamBody = true
	if err := resp.ReadLimitBody(cn.br, 0); err != nil {
		var small *fasthttp.ErrSmallBuffer
		if errors.As(err, &small) {
			return cn.readLargeAnswer(a)
		}
		return 0, "", false, err
	}
	status = resp.StatusCode()
	if a != nil && !emptySuccess(status, resp.Header.ContentLength()) {
		for k, v := range resp.Header.All() {
			a.addHeader(k, v)
		}
		a.endHeaders()
	}
	if status == http.StatusTooManyRequests || status >= 500 {
		if v := resp.Header.Peek("Retry-After"); len(v) > 0 {
			retryAfter = string(v)
		}
	}
	keep = !resp.ConnectionClose() // fasthttp sets it too for a body that ends with the connection
	if bs := resp.BodyStream(); bs != nil {
		cn.body = io.LimitedReader{R: bs, N: maxAnswerBytes}
		var rerr error
		if a != nil {
			rerr = a.readBody(&cn.body, bytes.Equal(resp.Header.ContentEncoding(), gzipToken))
		}
		if rerr == nil {
			_, rerr = io.Copy(io.Discard, &cn.body)
		}
		keep = keep && rerr == nil && cn.body.N > 0 // the body ended before the limit
		cn.body.R = nil
		_ = resp.CloseBodyStream()
	}
	return status, retryAfter, keep, nil
}

// readLargeAnswer reads an answer whose header block does not fit connBufferSize with
// net/http's parser (nothing of it was consumed), as net/http's client would, up to its bound
// of maxAnswerHeaderBytes, keeping what a asks; the connection is not kept.
func (cn *leanConn) readLargeAnswer(a *answer) (status int, retryAfter string, keep bool, err error) {
	br := bufio.NewReader(io.LimitReader(cn.br, maxAnswerHeaderBytes+maxAnswerBytes))
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return 0, "", false, err
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue // an interim answer
		}
		body := io.LimitReader(resp.Body, maxAnswerBytes)
		if a != nil {
			a.addHTTPHeaders(resp.Header)
			_ = a.readBody(body, resp.Header.Get("Content-Encoding") == "gzip")
		}
		_, _ = io.Copy(io.Discard, body)
		_ = resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After"), false, nil
	}
}

// headerList is the headers of one POST but Host, User-Agent and Content-Length, sorted by
// name: net/http's http.Header as post fills it, written as Header.Write does.
type headerList struct {
	kv    [maxLeanHeaders]headerField
	n     int  // may exceed maxLeanHeaders: then net/http sends the POST
	gzip  bool // Accept-Encoding: gzip, as net/http's transport asks unless told otherwise
	close bool // a static Connection: close
}

type headerField struct{ name, value string }

// canonicalKeys caches http.CanonicalHeaderKey of static header names: a name not already
// canonical would allocate its canonical form on every POST.
var canonicalKeys sync.Map

func canonicalKey(name string) string {
	if k, ok := canonicalKeys.Load(name); ok {
		return k.(string)
	}
	k := http.CanonicalHeaderKey(name)
	canonicalKeys.Store(name, k)
	return k
}

// build fills h with m's headers, refusing (as checkRequest does for net/http) a name or a
// value no request may carry.
func (h *headerList) build(m *message) error {
	for name, value := range m.headers {
		if !schemas.ValidHeaderName(name) {
			return badHeaderName(name)
		}
		key := canonicalKey(name)
		if !schemas.ValidHeaderValue(value) {
			return badHeaderValue(key)
		}
		switch key {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue // net/http writes its own, or none (a valid config has none of them)
		case "Connection":
			h.close = h.close || httpguts.HeaderValuesContainsToken([]string{value}, "close")
		}
		h.set(key, value)
	}
	if !schemas.ValidHeaderValue(m.messageID) {
		return badHeaderValue(schemas.HeaderXMessageID)
	}
	h.gzip = h.get("Accept-Encoding") == "" && h.get("Range") == ""
	h.set("Content-Type", "application/json")
	h.set(schemas.HeaderXMessageID, m.messageID)
	if m.xsig != "" {
		h.set(schemas.HeaderXSignature, m.xsig)
	}
	if m.traceparent != "" {
		h.set("Traceparent", m.traceparent)
		if m.tracestate != "" {
			h.set("Tracestate", m.tracestate)
		}
	}
	if m.stdSig != "" {
		h.set(schemas.HeaderWebhookID, m.messageID)
		h.set(schemas.HeaderWebhookTimestamp, m.stdTS)
		h.set(schemas.HeaderWebhookSignature, m.stdSig)
	}
	if h.n <= maxLeanHeaders {
		kv := h.kv[:h.n]
		for i := 1; i < len(kv); i++ { // insertion sort: a few dozen at most
			for j := i; j > 0 && kv[j].name < kv[j-1].name; j-- {
				kv[j], kv[j-1] = kv[j-1], kv[j]
			}
		}
	}
	return nil
}

func (h *headerList) set(name, value string) {
	for i := range min(h.n, maxLeanHeaders) {
		if h.kv[i].name == name {
			h.kv[i].value = value
			return
		}
	}
	if h.n < maxLeanHeaders {
		h.kv[h.n] = headerField{name, value}
	}
	h.n++
}

func (h *headerList) get(name string) string {
	for i := range min(h.n, maxLeanHeaders) {
		if h.kv[i].name == name {
			return h.kv[i].value
		}
	}
	return ""
}
