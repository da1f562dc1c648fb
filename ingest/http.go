package ingest

import (
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// apiError is the body of every error answer: analytics-python and others parse it.
type apiError struct {
	status        int
	Code, Message string
}

func (e *apiError) Error() string { return e.Message }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, map[string]string{"code": e.Code, "message": e.Message})
}

type response struct {
	Success  bool       `json:"success"`
	Rejected []rejected `json:"rejected,omitempty"`
}

type rejected struct {
	Index  int    `json:"index"`
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

func (s *Service) endpoint(name string, batch bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if s.refuseUntilConfigLoaded(w, r) {
			s.metrics.requests.WithLabelValues(name, "503").Inc()
			return
		}
		// Before any slot is taken or any byte of the body read: a write key in the headers is
		// checked (an unknown one costs nothing), and a client address may hold only so many
		// requests at once — so slow bodies, with or without a valid key, cannot take the slots
		// of real requests. Requests whose key is only in the body get a smaller pool.
		pool := s.inFlight
		headerKey, bearer := authKey(r)
		var src *schemas.Source // the header key's source; nil: the body's key decides (serve)
		if headerKey != "" {
			src = s.lookup(headerKey, bearer, "")
		}
		switch {
		case src != nil:
		case headerKey != "" && !bearer: // a Basic user name is authoritative
			closeUnread(w, r)
			w.Header().Set("WWW-Authenticate", `Basic realm="tributary"`)
			writeError(w, &apiError{http.StatusUnauthorized, "unauthorized", "missing or unknown write key: send it as the HTTP Basic user name"})
			s.metrics.requests.WithLabelValues(name, "401").Inc()
			return
		default:
			pool = s.bodyKeyInFlight
		}
		ip := s.clientIP(r)
		if lim := s.addressLimit(ip); lim != nil {
			if !lim.acquire(ip) {
				closeUnread(w, r)
				w.Header().Set("Retry-After", "1")
				writeError(w, &apiError{http.StatusTooManyRequests, "too_many_requests", "too many requests from this address at once; retry"})
				s.metrics.requests.WithLabelValues(name, "429").Inc()
				return
			}
			defer lim.release(ip)
		}
		if pool != nil {
			select {
			case pool <- struct{}{}:
				defer func() { <-pool }()
			default:
				closeUnread(w, r)
				w.Header().Set("Retry-After", "1")
				writeError(w, &apiError{http.StatusServiceUnavailable, "overloaded", "too many requests in flight; retry"})
				s.metrics.requests.WithLabelValues(name, "503").Inc()
				return
			}
		}
		// The body must come at a minimum rate: a request may take bodyReadBase plus its size
		// at minBodyRate to arrive (the server's own read timeout is longer).
		size := r.ContentLength
		if size < 0 {
			size = schemas.MaxBatchBytes
		}
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyReadBase + time.Duration(size)*time.Second/minBodyRate))
		s.metrics.inFlight.Inc()
		defer s.metrics.inFlight.Dec()
		status, n := s.serve(w, r, name, batch, src)
		s.metrics.requests.WithLabelValues(name, strconv.Itoa(status)).Inc()
		s.metrics.requestSeconds.WithLabelValues(name).Observe(time.Since(start).Seconds())
		_ = n
	})
}

// The minimum pace of a request body: bodyReadBase, plus a second per minBodyRate bytes.
const (
	bodyReadBase = 5 * time.Second
	minBodyRate  = 10 << 10
)

// addressLimit is the per-address bound of ip (nil: none). Without INGEST_TRUSTED_PROXIES, a
// private or loopback peer is most likely a load balancer or an ingress controller relaying
// every client: bounding it like one client would bound the whole ingest, so it gets the larger
// private-peer bound (INGEST_MAX_IN_FLIGHT_PER_PRIVATE_IP, at most three quarters of
// INGEST_MAX_IN_FLIGHT): its slow bodies cannot take every slot, and the other peers keep a
// quarter of them. With trusted proxies, ip is the client's own address, always bounded as one
// client (docs/ingest.md#behind-a-load-balancer).
func (s *Service) addressLimit(ip string) *ipLimit {
	if len(s.cfg.TrustedProxies) > 0 {
		return s.perIP
	}
	if a, err := netip.ParseAddr(ip); err == nil && (a.IsPrivate() || a.IsLoopback()) {
		return s.perPrivateIP
	}
	return s.perIP
}

// ipLimit counts the requests in progress per client address.
type ipLimit struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

func (l *ipLimit) acquire(ip string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[ip] >= l.max {
		return false
	}
	l.n[ip]++
	return true
}

func (l *ipLimit) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[ip]--; l.n[ip] <= 0 {
		delete(l.n, ip)
	}
}

// refuseUntilConfigLoaded answers 503 config_loading with Retry-After while the config is not
// loaded yet (Deps.ConfigReady), and says whether it did.
func (s *Service) refuseUntilConfigLoaded(w http.ResponseWriter, r *http.Request) bool {
	if s.deps.ConfigReady == nil {
		return false
	}
	select {
	case <-s.deps.ConfigReady:
		return false
	default:
	}
	closeUnread(w, r)
	w.Header().Set("Retry-After", "1")
	writeError(w, &apiError{http.StatusServiceUnavailable, "config_loading", "the configuration is still loading, so write keys cannot be checked yet; retry"})
	return true
}

// closeUnread closes the connection after the answer to a request refused before its body was
// read, without reading the body. Otherwise Go's server reads up to 256 KB of the unread body
// (to keep the connection alive) — before it writes the answer, and again when the request
// ends: a client trickling a body would get its refusal only once the whole body had arrived,
// and hold the connection and a goroutine as long.
func closeUnread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	}
}

// serve handles one request and returns the status it answered and the messages accepted.
// src is the source of the request's header write key, found by endpoint; nil: the body's
// writeKey (or a Bearer token that is not a write key) decides here.
func (s *Service) serve(w http.ResponseWriter, r *http.Request, name string, batch bool, src *schemas.Source) (status, accepted int) {
	fail := func(e *apiError) (int, int) {
		writeError(w, e)
		return e.status, 0
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST, OPTIONS")
		return fail(&apiError{http.StatusMethodNotAllowed, "method_not_allowed", "use POST"})
	}
	limit := int64(schemas.MaxMessageBytes)
	if batch {
		limit = schemas.MaxBatchBytes
	}
	body, apiErr := readBody(r, limit)
	if apiErr != nil {
		return fail(apiErr)
	}
	// One rule for invalid UTF-8, in every string of the message: U+FFFD (docs/ingest.md#request-format).
	body = schemas.ValidUTF8(body)

	env := &envelope{receivedAt: time.Now().UTC(), ip: s.clientIP(r)}
	var raws [][]byte
	var single *schemas.Message // the single call's message, decoded here for its writeKey
	var bodyKey string
	if batch {
		b, err := schemas.DecodeBatch(body)
		if err != nil {
			return fail(&apiError{http.StatusBadRequest, "invalid_json", err.Error()})
		}
		if len(b.Messages) > schemas.MaxBatchMessages {
			return fail(&apiError{http.StatusRequestEntityTooLarge, "batch_too_large", fmt.Sprintf("a batch holds at most %d messages, got %d", schemas.MaxBatchMessages, len(b.Messages))})
		}
		bodyKey = b.WriteKey
		env.sentAt, env.timestamp, env.context, env.integrations = b.SentAt, b.Timestamp, b.Context, b.Integrations
		raws = make([][]byte, len(b.Messages))
		for i, m := range b.Messages {
			raws[i] = m
		}
	} else {
		m, err := schemas.DecodeMessage(body)
		if err != nil {
			return fail(&apiError{http.StatusBadRequest, "invalid_json", err.Error()})
		}
		bodyKey = m.WriteKey
		env.callType = name
		raws, single = [][]byte{body}, m
	}
	// The write key: HTTP Basic user name or a Bearer token that is a write key (found by
	// endpoint); else the body's writeKey (analytics-java and older analytics-python and
	// analytics-node send no auth header).
	if src == nil {
		src = s.lookup("", false, bodyKey)
	}
	if src == nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="tributary"`)
		return fail(&apiError{http.StatusUnauthorized, "unauthorized", "missing or unknown write key: send it as the HTTP Basic user name"})
	}

	// The request's trace (docs/operations.md#tracing): its traceparent, continued by the
	// request's span when spans are exported; every message of it carries the result.
	env.trace = platform.TraceFromHTTP(r.Header)
	if s.tracer.Enabled() {
		var span platform.Span
		span, env.trace = s.tracer.Start(env.trace, "POST /v1/"+name, platform.SpanServer,
			attribute.String(attrSourceID, src.ID), attribute.Int(attrEventCount, len(raws)))
		defer func() { span.SetAttributes(attribute.Int("http.response.status_code", status)); span.End() }()
	}

	recs := make([]*kgo.Record, 0, len(raws))
	var rejects []rejected
	for i, raw := range raws {
		m, err := single, error(nil)
		if batch {
			m, err = schemas.DecodeMessage(raw) // once: for its record or, rejected, its key
		}
		rec, rej := s.prepareDecoded(raw, m, err, src, env)
		if rej != nil {
			if !batch {
				status := http.StatusBadRequest
				if rej.code == "message_too_large" {
					status = http.StatusRequestEntityTooLarge
				}
				s.metrics.rejected.WithLabelValues(rej.code).Inc()
				return fail(&apiError{status, rej.code, rej.reason})
			}
			rejects = append(rejects, rejected{Index: i, Code: rej.code, Reason: rej.reason})
			recs = append(recs, s.rejectedRecord(raw, src, rejectKey(m), rej))
			continue
		}
		recs = append(recs, rec)
	}
	if err := s.produce(r.Context(), recs); err != nil {
		s.logger.Warn().Err(err).Str("endpoint", name).Int("records", len(recs)).Msg("kafka did not acknowledge; answering 503")
		w.Header().Set("Retry-After", "1")
		return fail(&apiError{http.StatusServiceUnavailable, "unavailable", "the event store did not acknowledge in time; retry"})
	}
	accepted = len(recs) - len(rejects)
	s.metrics.messages.WithLabelValues("accepted", src.ID).Add(float64(accepted))
	if len(rejects) > 0 {
		s.metrics.messages.WithLabelValues("rejected", src.ID).Add(float64(len(rejects)))
	}
	for _, rj := range rejects {
		s.metrics.rejected.WithLabelValues(rj.Code).Inc()
	}
	writeJSON(w, http.StatusOK, response{Success: true, Rejected: rejects})
	return http.StatusOK, accepted
}

// readBody reads the request body, gunzipping it when Content-Encoding is gzip, and refuses
// (413) anything past limit, counted after decompression so a gzip bomb stops at the limit.
func readBody(r *http.Request, limit int64) ([]byte, *apiError) {
	tooLarge := &apiError{http.StatusRequestEntityTooLarge, "payload_too_large", fmt.Sprintf("the body is larger than %d bytes", limit)}
	if r.ContentLength > limit && r.Header.Get("Content-Encoding") == "" {
		return nil, tooLarge
	}
	var rd io.Reader = r.Body
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(io.LimitReader(r.Body, limit+1))
		if err != nil {
			return nil, &apiError{http.StatusBadRequest, "invalid_body", "the body is not valid gzip"}
		}
		defer zr.Close()
		rd = zr
	default:
		return nil, &apiError{http.StatusUnsupportedMediaType, "unsupported_encoding", fmt.Sprintf("Content-Encoding %q is not supported (use gzip)", enc)}
	}
	body, err := io.ReadAll(io.LimitReader(rd, limit+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge
		}
		return nil, &apiError{http.StatusBadRequest, "invalid_body", "reading the body: " + err.Error()}
	}
	if int64(len(body)) > limit {
		return nil, tooLarge
	}
	return body, nil
}

// authKey returns the write key of an Authorization header: the user name of Basic (the
// password is ignored and the colon optional), or a Bearer token (bearer true).
func authKey(r *http.Request) (key string, bearer bool) {
	h := r.Header.Get("Authorization")
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok {
		return "", false
	}
	switch strings.ToLower(scheme) {
	case "basic":
		dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
		if err != nil {
			return "", false
		}
		user, _, _ := strings.Cut(string(dec), ":")
		return user, false
	case "bearer":
		return strings.TrimSpace(cred), true
	}
	return "", false
}

// lookup finds the source of the first write key that names one. A Basic user name is
// authoritative; a Bearer token may be a write key, else the body's writeKey decides.
func (s *Service) lookup(headerKey string, bearer bool, bodyKey string) *schemas.Source {
	sources := s.deps.Sources()
	if sources == nil {
		return nil
	}
	find := func(key string) *schemas.Source {
		if key == "" {
			return nil
		}
		src, ok := sources.SourceByKeyHash(schemas.HashWriteKey(key))
		if !ok {
			return nil
		}
		return src
	}
	if headerKey != "" && !bearer {
		return find(headerKey)
	}
	if src := find(headerKey); src != nil {
		return src
	}
	return find(bodyKey)
}

// clientIP is the TCP peer, or, when the peer is a trusted proxy, the nearest address of
// X-Forwarded-For that is not itself a trusted proxy.
func (s *Service) clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !s.trusted(peer) {
		return host
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		if !s.trusted(a) {
			return a.String()
		}
	}
	return host
}

func (s *Service) trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// rejectKey keys a rejected message like its accepted form would be: userId, else
// anonymousId, when they can be read (m is the message decoded, nil when it could not be).
func rejectKey(m *schemas.Message) []byte {
	if m == nil || m.Key() == "" {
		return nil
	}
	return []byte(m.Key())
}
