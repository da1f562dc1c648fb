package main

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tributary-cdp/tributary/schemas"
)

// sharedSecret signs every webhook of the harness's destinations; the receiver checks it.
const sharedSecret = "reliability-secret"

// faultMode is what the receiver does to a request on a measured path.
type faultMode int32

const (
	healthy faultMode = iota
	outage            // 503 to everything
	flaky             // a share of requests fail: 5xx, hang, slow or reset
)

// receiver is the recording webhook receiver: every path records the message ids it got
// (X-Message-Id) with their first arrival, checks the signature and the body. /hang never
// answers (until the client gives up), /slow answers after 4 s; the others answer 200, or
// fail as the fault mode says.
type receiver struct {
	srv *http.Server
	// addrs are its three listeners: the measured paths on 127.0.0.1, /hang on 127.0.0.2 and
	// /slow on 127.0.0.3 — other hosts, as a customer's dead and slow endpoints are, since the
	// deliverer shares limits and breakers per host.
	addrs map[string]string
	mode  atomic.Int32
	// failShare is the share of requests flaky fails (of 1000).
	failShare int

	mu       sync.Mutex
	paths    map[string]*pathLog
	badSig   int
	badBody  int
	requests int
}

type pathLog struct {
	first map[string]time.Time // message id → first arrival
	count map[string]int
	// latency of each message's first arrival: arrival − its sentAtNs property.
	latencies []time.Duration
	// last is the last arrival.
	last time.Time
}

func startReceiver() (*receiver, error) {
	r := &receiver{addrs: map[string]string{}, paths: map[string]*pathLog{}, failShare: 200}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	for path, host := range map[string]string{"": "127.0.0.1", "/hang": "127.0.0.2", "/slow": "127.0.0.3"} {
		l, err := net.Listen("tcp", host+":0")
		if err != nil {
			r.close()
			return nil, err
		}
		r.addrs[path] = l.Addr().String()
		go func() { _ = r.srv.Serve(l) }()
	}
	return r, nil
}

func (r *receiver) url(path string) string {
	addr, ok := r.addrs[path]
	if !ok {
		addr = r.addrs[""]
	}
	return "http://" + addr + path
}

func (r *receiver) setMode(m faultMode) { r.mode.Store(int32(m)) }

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch req.URL.Path {
	case "/hang":
		<-req.Context().Done()
		return
	case "/gone": // refused for good: dead-lettered at once (the hostile scenario's replay check)
		w.WriteHeader(http.StatusGone)
		return
	case "/slow":
		select {
		case <-time.After(4 * time.Second):
		case <-req.Context().Done():
			return
		}
	default:
		switch faultMode(r.mode.Load()) {
		case outage:
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		case flaky:
			if rand.IntN(1000) < r.failShare {
				r.fail(w, req)
				return
			}
		}
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 2<<20))
	if err != nil {
		return
	}
	now := time.Now()
	var msg struct {
		MessageID  string `json:"messageId"`
		Properties struct {
			SentAtNs int64 `json:"sentAtNs"`
		} `json:"properties"`
	}
	// encoding/json accepts invalid UTF-8 (it replaces it), so check it apart: a webhook body
	// must be valid JSON, hence valid UTF-8.
	bodyOK := utf8.Valid(body) && json.Unmarshal(body, &msg) == nil && msg.MessageID == req.Header.Get("X-Message-Id")
	sigOK := schemas.VerifyXSignature(sharedSecret, body, req.Header.Get("X-Signature"))
	r.mu.Lock()
	r.requests++
	if !sigOK {
		r.badSig++
	}
	if !bodyOK {
		r.badBody++
	}
	pl := r.paths[req.URL.Path]
	if pl == nil {
		pl = &pathLog{first: map[string]time.Time{}, count: map[string]int{}}
		r.paths[req.URL.Path] = pl
	}
	id := req.Header.Get("X-Message-Id")
	if pl.count[id] == 0 {
		pl.first[id] = now
		if msg.Properties.SentAtNs > 0 {
			pl.latencies = append(pl.latencies, now.Sub(time.Unix(0, msg.Properties.SentAtNs)))

		}
	}
	pl.count[id]++
	pl.last = now
	r.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// fail fails one request as a flaky endpoint does, one of four ways: a 500; a hang past the
// deliverer's 5 s timeout; a 502 after a second; a reset connection.
func (r *receiver) fail(w http.ResponseWriter, req *http.Request) {
	switch rand.IntN(4) {
	case 0:
		w.WriteHeader(http.StatusInternalServerError)
	case 1:
		select { // hang: the deliverer's timeout ends it
		case <-req.Context().Done():
		case <-time.After(30 * time.Second):
		}
	case 2:
		time.Sleep(time.Second)
		w.WriteHeader(http.StatusBadGateway)
	default:
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // RST, not FIN
				}
				c.Close()
				return
			}
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}
}

// counts returns what the paths received: per message id, its arrival count.
func (r *receiver) counts(paths ...string) map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, p := range paths {
		if pl := r.paths[p]; pl != nil {
			for id, n := range pl.count {
				out[id] += n
			}
		}
	}
	return out
}

// lastArrival is when path last received a webhook (zero: never).
func (r *receiver) lastArrival(path string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if pl := r.paths[path]; pl != nil {
		return pl.last
	}
	return time.Time{}
}

func (r *receiver) latencies(paths ...string) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Duration
	for _, p := range paths {
		if pl := r.paths[p]; pl != nil {
			out = append(out, pl.latencies...)
		}
	}
	return out
}

func (r *receiver) bad() (sig, body int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.badSig, r.badBody
}

func (r *receiver) close() { _ = r.srv.Close() }
