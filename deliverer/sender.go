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

	"github.com/tributary-cdp/tributary/schemas"
)

// UserAgent is the User-Agent of every POST (docs/receivers.md#headers: "<product>/1.0").
const UserAgent = "Tributary/1.0"

// newHTTPClient builds the client every delivery uses: the address guard at dial time (unless
// allowPrivate), certificates verified against the system roots plus caFiles, no proxy from
// the environment (it would bypass the guard), no redirects followed. dial, when not nil,
// replaces the guarded dialer (Deps.DialContext).
func newHTTPClient(cfg Config, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (*http.Client, error) {
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
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dial,
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   cfg.Timeout,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          cfg.MaxInFlight,
		MaxIdleConnsPerHost:   cfg.MaxPerHost,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: cfg.Timeout,
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
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
}

// request is what one attempt sends: the same body to each URL that was admitted.
type request struct {
	dest      *schemas.Destination
	entries   []schemas.Webhook
	messageID string
	body      []byte
}

// post sends the request to every entry concurrently (docs/delivery.md#one-attempt: one success is
// enough, failed URLs are not retried after that) and returns one result per entry.
func post(ctx context.Context, client *http.Client, timeout time.Duration, rq *request, now time.Time) []urlResult {
	xsig := ""
	if rq.dest.Settings.SharedSecret != "" {
		xsig = schemas.XSignature(rq.dest.Settings.SharedSecret, rq.body)
	}
	stdSig, stdTS := "", ""
	if rq.dest.Settings.StandardWebhooks && rq.dest.Settings.SharedSecret != "" {
		ts := now.Unix()
		stdTS = strconv.FormatInt(ts, 10)
		stdSig = schemas.StandardWebhooksHeader(rq.messageID, ts, rq.body, rq.dest.Settings.SharedSecret, rq.dest.Settings.PreviousSharedSecret)
	}
	results := make([]urlResult, len(rq.entries))
	one := func(i int) {
		e := rq.entries[i]
		res := &results[i]
		res.URL, res.Host = e.URL, hostOf(e.URL)
		rctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(rctx, http.MethodPost, e.URL, bytes.NewReader(rq.body))
		if err != nil {
			res.Class, res.Err = InvalidURL, err
			return
		}
		for k, v := range e.Headers {
			req.Header.Set(k, v)
		}
		// Marks the POST replayable without sending a header: net/http then sends it again at
		// once, on a new connection, when a reused keep-alive connection turns out to have been
		// closed by the server (a race every server's idle timeout causes). The body is ours,
		// and X-Message-Id makes a second delivery harmless.
		req.Header["X-Idempotency-Key"] = nil
		req.Header.Set("User-Agent", UserAgent)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(schemas.HeaderXMessageID, rq.messageID)
		if xsig != "" {
			req.Header.Set(schemas.HeaderXSignature, xsig)
		}
		if stdSig != "" {
			req.Header[schemas.HeaderWebhookID] = []string{rq.messageID}
			req.Header[schemas.HeaderWebhookTimestamp] = []string{stdTS}
			req.Header[schemas.HeaderWebhookSignature] = []string{stdSig}
		}
		if err := checkRequest(req); err != nil {
			res.Err = err
			res.Class, _ = Classify(0, nil, err, time.Now())
			return
		}
		start := time.Now()
		resp, err := send(client, req)
		if err == nil {
			// Read a little of the answer so the connection can be reused; the body itself is
			// not used.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			res.Status = resp.StatusCode
			res.Class, res.RetryAfter = Classify(resp.StatusCode, resp.Header, nil, time.Now())
		} else {
			res.Err = err
			res.Class, _ = Classify(0, nil, err, time.Now())
		}
		res.Latency = time.Since(start)
	}
	if len(rq.entries) == 1 {
		one(0)
		return results
	}
	var wg sync.WaitGroup
	for i := range rq.entries {
		wg.Add(1)
		go func() { defer wg.Done(); one(i) }()
	}
	wg.Wait()
	return results
}

// checkRequest refuses, before anything is sent, a request whose headers net/http would
// refuse: a messageId or a static header value with a control character
// (docs/security.md#what-cannot-become-a-header). The error names the header, never its value
// (static headers carry tokens).
func checkRequest(req *http.Request) error {
	for name, values := range req.Header {
		if !schemas.ValidHeaderName(name) {
			return &requestError{fmt.Errorf("header name %q is not an HTTP token", name)}
		}
		for _, v := range values {
			if !schemas.ValidHeaderValue(v) {
				return &requestError{fmt.Errorf("header %s: the value holds a control character (CR, LF, NUL...), which no HTTP header may carry", name)}
			}
		}
	}
	return nil
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
