package deliverer

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// UserAgent is the User-Agent of every POST (docs/receivers.md#headers: "<product>/1.0").
const UserAgent = "Tributary/1.0"

// webhookClient sends the deliverer's webhook POSTs (docs/delivery.md#http-client): the lean
// HTTP/1.1 client (lean.go) sends each one it can, net/http the others: an HTTPS host that
// chose HTTP/2, and the rare URL the lean client leaves to it. Both dial through the address
// guard (unless allowPrivate) with the same TLS settings, follow no redirect and use no proxy
// from the environment (it would bypass the guard).
type webhookClient struct {
	lean *leanClient
	std  *stdPoster
}

var (
	_ poster = (*webhookClient)(nil)
	_ poster = (*leanClient)(nil)
	_ poster = (*stdPoster)(nil)
)

// poster sends one webhook POST, whole (connection, request, answer's headers and up to
// maxAnswerBytes of its body) before deadline, and returns the answer's status and Retry-After
// value. An error is classified by Classify.
type poster interface {
	send(ctx context.Context, m message, deadline time.Time) (status int, retryAfter string, err error)
}

// message is one webhook POST: the body and headers of an attempt, for one URL.
type message struct {
	url       string
	headers   map[string]string // the entry's static headers
	messageID string
	xsig      string // X-Signature; "" without a shared secret
	stdTS     string // webhook-timestamp and webhook-signature; "" without Standard Webhooks
	stdSig    string
	body      []byte
	// traceparent and tracestate, when not empty, are the W3C trace-context headers of the
	// POST (docs/receivers.md#headers).
	traceparent, tracestate string
	// answer, when set, keeps the answer's headers and the first bytes of its body (answer.go).
	answer *answer
}

// newWebhookClient builds the deliverer's client: certificates verified against the system
// roots plus cfg.CAFiles (TLS 1.2 at least), connections dialled by dial or, when nil, by the
// guarded dialer (unless cfg.AllowPrivate), idle ones closed after 90 s. The end of stop
// interrupts every POST in progress (the deliverer's grace: a POST never outlives it).
func newWebhookClient(cfg Config, dial func(ctx context.Context, network, addr string) (net.Conn, error), stop context.Context) (*webhookClient, error) {
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	for _, f := range cfg.CAFiles {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("WEBHOOK_CA_FILES: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("WEBHOOK_CA_FILES: %s holds no PEM certificate", f)
		}
	}
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivate {
		dialer.Control = guardControl
	}
	if dial == nil {
		dial = guardDial(dialer.DialContext, !cfg.AllowPrivate)
	}
	tlsConfig := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dial,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   cfg.Timeout,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          cfg.MaxInFlight,
		MaxIdleConnsPerHost:   cfg.MaxPerHost,
		IdleConnTimeout:       idleConnTimeout,
		ResponseHeaderTimeout: cfg.Timeout,
	}
	std := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &webhookClient{lean: newLeanClient(dial, tlsConfig, cfg.MaxPerHost, stop), std: &stdPoster{std}}, nil
}

// send is poster.send: the lean client's, or net/http's when the lean client leaves the POST
// to it (in the same deadline).
func (c *webhookClient) send(ctx context.Context, m message, deadline time.Time) (int, string, error) {
	status, retryAfter, err := c.lean.send(ctx, m, deadline)
	if errors.Is(err, errUseStd) {
		return c.std.send(ctx, m, deadline)
	}
	return status, retryAfter, err
}

// close closes every connection; a POST still in progress fails.
func (c *webhookClient) close() {
	c.lean.close()
	c.std.client.CloseIdleConnections()
}

// stdPoster sends POSTs with net/http: HTTP/2 where the host offers it.
type stdPoster struct{ client *http.Client }

func (p *stdPoster) send(ctx context.Context, m message, deadline time.Time) (int, string, error) {
	rctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, m.url, bytes.NewReader(m.body))
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // it repeats the URL
		}
		return 0, "", &invalidURLError{err}
	}
	for k, v := range m.headers {
		req.Header.Set(k, v)
	}
	// Marks the POST replayable without sending a header: net/http then sends it again at
	// once, on a new connection, when a reused keep-alive connection turns out to have been
	// closed by the server (a race every server's idle timeout causes). The body is ours,
	// and X-Message-Id makes a second delivery harmless.
	req.Header["X-Idempotency-Key"] = nil
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(schemas.HeaderXMessageID, m.messageID)
	if m.xsig != "" {
		req.Header.Set(schemas.HeaderXSignature, m.xsig)
	}
	if m.traceparent != "" {
		req.Header["Traceparent"] = []string{m.traceparent}
		if m.tracestate != "" {
			req.Header["Tracestate"] = []string{m.tracestate}
		}
	}
	if m.stdSig != "" {
		req.Header[schemas.HeaderWebhookID] = []string{m.messageID}
		req.Header[schemas.HeaderWebhookTimestamp] = []string{m.stdTS}
		req.Header[schemas.HeaderWebhookSignature] = []string{m.stdSig}
	}
	if err := checkRequest(req); err != nil {
		return 0, "", err
	}
	resp, err := send(p.client, req)
	if err != nil {
		return 0, "", err
	}
	// Read a little of the answer so the connection can be reused, keeping its first bytes
	// when asked (net/http undid the gzip it asked for).
	body := io.LimitReader(resp.Body, maxAnswerBytes)
	if m.answer != nil {
		m.answer.addHTTPHeaders(resp.Header)
		_ = m.answer.readBody(body, false)
	}
	_, _ = io.Copy(io.Discard, body)
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After"), nil
}

// urlResult is the outcome of one POST to one URL.
type urlResult struct {
	URL        string
	Host       string
	Status     int
	Class      Class
	RetryAfter time.Duration
	Latency    time.Duration
	Err        error
	// answer is what the POST kept of the endpoint's answer (answer.go); nil before a POST.
	// The attempt that logged it releases it.
	answer *answer
}

// request is what one attempt sends: the same body to each URL that was admitted.
type request struct {
	dest      *schemas.Destination
	entries   []schemas.Webhook
	messageID string
	body      []byte
	// trace is the event's trace context; tracer, when set, makes each POST a span
	// (docs/operations.md#tracing) whose id is the POST's traceparent; else the traceparent
	// goes out as it came. attempt is the attempt's number, for the span.
	trace   platform.TraceContext
	tracer  *platform.Tracer
	attempt int
}

// post sends the request to every entry concurrently (docs/delivery.md#one-attempt: one success
// is enough, failed URLs are not retried after that), each POST bounded by timeout and ctx, and
// returns one result per entry.
func post(ctx context.Context, client poster, timeout time.Duration, rq *request, now time.Time) []urlResult {
	m := message{messageID: rq.messageID, body: rq.body}
	if rq.dest.Settings.SharedSecret != "" {
		m.xsig = schemas.XSignature(rq.dest.Settings.SharedSecret, rq.body)
	}
	if rq.dest.Settings.StandardWebhooks && rq.dest.Settings.SharedSecret != "" {
		ts := now.Unix()
		m.stdTS = strconv.FormatInt(ts, 10)
		m.stdSig = schemas.StandardWebhooksHeader(rq.messageID, ts, rq.body, rq.dest.Settings.SharedSecret, rq.dest.Settings.PreviousSharedSecret)
	}
	if !rq.trace.IsZero() && rq.tracer == nil { // passed on as it came (docs/receivers.md#headers)
		m.traceparent, m.tracestate = string(rq.trace.Parent), string(rq.trace.State)
	}
	results := make([]urlResult, len(rq.entries))
	if len(rq.entries) == 1 {
		postTraced(ctx, client, timeout, m, rq, rq.entries[0], &results[0])
		return results
	}
	var wg sync.WaitGroup
	for i, e := range rq.entries {
		wg.Go(func() { postTraced(ctx, client, timeout, m, rq, e, &results[i]) })
	}
	wg.Wait()
	return results
}

// postTraced is postOne in a span of its own when rq has a tracer (docs/operations.md#tracing):
// the POST's traceparent names that span. Its attributes name the URL's host, never the URL
// (it may carry a token).
func postTraced(ctx context.Context, client poster, timeout time.Duration, m message, rq *request, e schemas.Webhook, res *urlResult) {
	if rq.tracer == nil {
		postOne(ctx, client, timeout, m, e, res)
		return
	}
	span, tc := rq.tracer.Start(rq.trace, "POST webhook", platform.SpanClient)
	m.traceparent, m.tracestate = string(tc.Parent), string(tc.State)
	if !span.Recording() { // not sampled: no attributes to build
		postOne(ctx, client, timeout, m, e, res)
		span.End()
		return
	}
	span.SetAttributes(attribute.String("url.host", hostOf(e.URL)), attribute.String("tributary.destination.id", rq.dest.ID),
		attribute.Int("tributary.attempt", rq.attempt))
	postOne(ctx, client, timeout, m, e, res)
	if res.Status != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", res.Status))
	}
	if res.Class != Success {
		msg := ""
		if res.Err != nil {
			msg = res.Err.Error()
		}
		span.Fail(string(res.Class), msg)
	}
	span.End()
}

// postOne sends m to the webhook entry e and fills res.
func postOne(ctx context.Context, client poster, timeout time.Duration, m message, e schemas.Webhook, res *urlResult) {
	res.URL, res.Host = e.URL, hostOf(e.URL)
	res.answer = newAnswer()
	m.url, m.headers, m.answer = e.URL, e.Headers, res.answer
	start := time.Now()
	status, retryAfter, err := client.send(ctx, m, start.Add(timeout))
	res.Latency = time.Since(start)
	res.Status, res.Err = status, err
	if err != nil {
		res.Class, _ = Classify(0, nil, err, time.Now())
		return
	}
	res.Class, res.RetryAfter = classifyAnswer(status, retryAfter, time.Now())
}

// checkRequest refuses, before anything is sent, a request whose headers net/http would
// refuse: a messageId or a static header value with a control character
// (docs/security.md#what-cannot-become-a-header). The error names the header, never its value
// (static headers carry tokens). The lean client checks the same (headerList.build).
func checkRequest(req *http.Request) error {
	for name, values := range req.Header {
		if !schemas.ValidHeaderName(name) {
			return badHeaderName(name)
		}
		for _, v := range values {
			if !schemas.ValidHeaderValue(v) {
				return badHeaderValue(name)
			}
		}
	}
	return nil
}

func badHeaderName(name string) error {
	return &requestError{fmt.Errorf("header name %q is not an HTTP token", name)}
}

func badHeaderValue(name string) error {
	return &requestError{fmt.Errorf("header %s: the value holds a control character (CR, LF, NUL...), which no HTTP header may carry", name)}
}

// send is client.Do, except that an error returned before net/http asked for a connection is
// about the request itself (an invalid header, method or URL, whatever checkRequest did not
// foresee): it is a requestError, classed InvalidRequest, never a connection failure that
// would be retried and counted toward the host's breaker. A deadline that passed first stays a
// timeout.
func send(client *http.Client, req *http.Request) (*http.Response, error) {
	var reached atomic.Bool
	trace := &httptrace.ClientTrace{GetConn: func(string) { reached.Store(true) }}
	resp, err := client.Do(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if err != nil && !reached.Load() && req.Context().Err() == nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // it repeats the URL, whose query may hold a secret
		}
		return nil, &requestError{err}
	}
	return resp, err
}

// verdict folds the results of one attempt: Success when any URL answered 2xx; else retryable
// when any failure is retryable (with the longest Retry-After asked); else the first permanent
// class. last is the result that explains the verdict.
func verdict(results []urlResult) (c Class, retryAfter time.Duration, last *urlResult) {
	for i := range results {
		if results[i].Class == Success {
			return Success, 0, &results[i]
		}
	}
	for i := range results {
		r := &results[i]
		if r.Class.Retryable() {
			if last == nil || !last.Class.Retryable() {
				last = r
			}
			retryAfter = max(retryAfter, r.RetryAfter)
		} else if last == nil {
			last = r
		}
	}
	if last == nil {
		return ConnError, 0, nil
	}
	return last.Class, retryAfter, last // retryAfter is 0 unless a failure was retryable
}

// hostCache remembers hostOf's answers: URLs come from the config, so the set is small.
var hostCache sync.Map

// hostOf is the host:port a URL connects to, the unit of isolation.
func hostOf(raw string) string {
	if h, ok := hostCache.Load(raw); ok {
		return h.(string)
	}
	h := parseHost(raw)
	hostCache.Store(raw, h)
	return h
}

func parseHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}
