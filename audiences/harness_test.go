package audiences_test

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/audiences"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

// harness is an embedded broker with every topic and a config store (servicetest.Env) and a
// reader of the identify calls the service writes. newHarness's runs on the virtual network,
// for a test inside a testing/synctest bubble: the services' clock (Deps.Now unset: time.Now)
// and every wait of the test are the bubble's, so time passes (advance) in no real time.
type harness struct {
	*servicetest.Env
	t      *testing.T
	events *servicetest.Reader
	seen   int // records of events already returned by identifies
	// port is the last port given to a service's API on the virtual network (0: loopback TCP).
	port int
	// tracer, when set, is the Tracer of the services the harness builds.
	tracer *platform.Tracer
}

// newHarness is a harness on the virtual network: call it inside synctest.Test.
func newHarness(t *testing.T, yaml string) *harness {
	t.Helper()
	return newHarnessWith(t, servicetest.Options{Config: yaml, Virtual: true})
}

// newTCPHarness is a harness on loopback TCP, in real time, whose broker a service process
// (servicetest.Spawn) can reach.
func newTCPHarness(t *testing.T, yaml string) *harness {
	t.Helper()
	return newHarnessWith(t, servicetest.Options{Config: yaml})
}

func newHarnessWith(t *testing.T, o servicetest.Options) *harness {
	t.Helper()
	env := servicetest.New(t, o)
	h := &harness{Env: env, t: t, events: env.Reader(schemas.TopicEvents)}
	h.events.Settle = 300 * time.Millisecond
	if o.Virtual {
		h.port = 8100
	}
	return h
}

// at is the timestamp d from now.
func at(d time.Duration) string { return schemas.FormatTimestamp(time.Now().Add(d).UTC()) }

// advance lets d pass, in virtual time: the services' syncs and timers run meanwhile.
func (h *harness) advance(d time.Duration) {
	if h.Network == nil {
		h.t.Fatal("advance needs a harness on the virtual network (newHarness)")
	}
	time.Sleep(d)
}

// addr is an address for a service's API: on the virtual network, a port of its own; else a
// free loopback port.
func (h *harness) addr() string {
	h.t.Helper()
	if h.Network == nil {
		return servicetest.FreeAddr(h.t)
	}
	h.port++
	return "localhost:" + strconv.Itoa(h.port)
}

// api is the base URL of svc's API.
func api(svc *audiences.Service) string { return "http://" + svc.Addr() }

// service builds an audiences service of the harness (sync every second, an address of
// its own for the API) with mod applied. On the virtual network it serves its API there and
// asks its peers through it.
func (h *harness) service(id string, mod func(*audiences.Config)) (*audiences.Service, *prometheus.Registry) {
	h.t.Helper()
	cfg := audiences.DefaultConfig()
	cfg.SyncInterval = time.Second
	cfg.Addr = h.addr()
	cfg.TransactionalID = id
	cfg.TransactionTimeout = 5 * time.Second
	cfg.Token = testToken
	if mod != nil {
		mod(&cfg)
	}
	reg := prometheus.NewRegistry()
	svc, err := audiences.New(cfg, audiences.Deps{
		Deps: platform.Deps{
			Kafka:      h.Kafka,
			KafkaOpts:  h.KafkaOpts,
			Logger:     h.Logger,
			Registerer: reg,
			Gatherer:   reg,
			Tracer:     h.tracer,
		},
		Config: func() audiences.Snapshot { return h.Store.Snapshot() }, ConfigReady: h.Store.Ready(),
	})
	if err != nil {
		h.t.Fatal(err)
	}
	if h.Network != nil {
		_, port, _ := net.SplitHostPort(cfg.Addr)
		p, _ := strconv.Atoi(port)
		svc.ServeOn(h.Listen(p), h.HTTPClient().Transport)
	} else if err := svc.Listen(); err != nil {
		h.t.Fatal(err)
	}
	return svc, reg
}

// run starts a service; stop stops it (and waits for it).
func (h *harness) run(id string, mod func(*audiences.Config)) (*audiences.Service, *prometheus.Registry, func()) {
	h.t.Helper()
	svc, reg := h.service(id, mod)
	return svc, reg, h.Start("audiences "+id, svc.Run)
}

// send produces messages to tracking.events as ingest would (source web).
func (h *harness) send(msgs ...string) {
	h.t.Helper()
	recs := make([]*kgo.Record, 0, len(msgs))
	for _, m := range msgs {
		recs = append(recs, servicetest.EventRecord(h.t, "web", m))
	}
	h.Produce(recs...)
}

func (h *harness) track(user, event string, props string) {
	h.t.Helper()
	if props == "" {
		props = "{}"
	}
	h.send(fmt.Sprintf(`{"type":"track","userId":%q,"event":%q,"properties":%s,"timestamp":%q}`, user, event, props, at(0)))
}

// identify is one identify call the service produced.
type identify struct {
	UserID      string         `json:"userId"`
	AnonymousID string         `json:"anonymousId"`
	MessageID   string         `json:"messageId"`
	Timestamp   string         `json:"timestamp"`
	Traits      map[string]any `json:"traits"`
	Context     struct {
		Personas map[string]string `json:"personas"`
	} `json:"context"`
	source string
	key    string
}

func (i identify) String() string {
	return fmt.Sprintf("%s%s %v", i.UserID, i.AnonymousID, i.Traits)
}

func decodeIdentifies(t *testing.T, recs []*kgo.Record) []identify {
	t.Helper()
	var out []identify
	for _, r := range recs {
		if servicetest.Header(r, audiences.HeaderOrigin) != audiences.OriginAudiences || servicetest.Header(r, schemas.HeaderType) == "track" {
			continue // track calls: decodeTracks
		}
		var id identify
		if err := json.Unmarshal(r.Value, &id); err != nil {
			t.Fatalf("an identify of the service does not decode: %v: %s", err, r.Value)
		}
		if servicetest.Header(r, schemas.HeaderType) != "identify" || servicetest.Header(r, schemas.HeaderMessageID) != id.MessageID {
			t.Fatalf("identify headers: %v", r.Headers)
		}
		if m, err := schemas.DecodeMessage(r.Value); err != nil || m.Validate() != nil {
			t.Fatalf("the identify is not a valid message: %v %v: %s", err, m.Validate(), r.Value)
		}
		id.source, id.key = servicetest.Header(r, schemas.HeaderSourceID), string(r.Key)
		out = append(out, id)
	}
	return out
}

// identifies waits until n more identify calls than the last call returned were written (and
// a settle time more), and returns the new ones.
func (h *harness) identifies(n int, timeout time.Duration) []identify {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		h.events.Poll()
		got := decodeIdentifies(h.t, h.events.Got)[h.seen:]
		if len(got) >= n {
			for settled := time.Now().Add(h.events.Settle); time.Now().Before(settled); {
				h.events.Poll()
			}
			got = decodeIdentifies(h.t, h.events.Got)[h.seen:]
			h.seen += len(got)
			return got
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%d identify calls after %v, want %d: %v", len(got), timeout, n, got)
		}
	}
}

// quiet asserts that no identify call is written for d.
func (h *harness) quiet(d time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		h.events.Poll()
	}
	if got := decodeIdentifies(h.t, h.events.Got)[h.seen:]; len(got) > 0 {
		h.t.Fatalf("%d identify calls, want none: %v", len(got), got)
	}
}

// byUser indexes identify calls by user (userId, else anonymousId) and trait.
func byUser(ids []identify) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, id := range ids {
		u := id.UserID
		if u == "" {
			u = id.AnonymousID
		}
		if out[u] == nil {
			out[u] = map[string]any{}
		}
		for k, v := range id.Traits {
			if _, dup := out[u][k]; dup {
				out[u][k+" (again)"] = v
			}
			out[u][k] = v
		}
	}
	return out
}

// testToken is the AUDIENCES_TOKEN of the harness's services.
const testToken = "audiences-test-token-0123456789"

// trackCall is a track call of the service (an audience with output track or both).
type trackCall struct {
	UserID      string         `json:"userId"`
	AnonymousID string         `json:"anonymousId"`
	MessageID   string         `json:"messageId"`
	Event       string         `json:"event"`
	Properties  map[string]any `json:"properties"`
	Context     struct {
		Personas map[string]string `json:"personas"`
	} `json:"context"`
}

// decodeTracks decodes the service's track calls among recs, checking their headers.
func decodeTracks(t *testing.T, recs []*kgo.Record) []trackCall {
	t.Helper()
	var out []trackCall
	for _, r := range recs {
		if servicetest.Header(r, audiences.HeaderOrigin) != audiences.OriginAudiences || servicetest.Header(r, schemas.HeaderType) != "track" {
			continue
		}
		var tr trackCall
		if err := json.Unmarshal(r.Value, &tr); err != nil {
			t.Fatalf("a track call of the service does not decode: %v: %s", err, r.Value)
		}
		if servicetest.Header(r, schemas.HeaderMessageID) != tr.MessageID {
			t.Fatalf("track headers: %v", r.Headers)
		}
		out = append(out, tr)
	}
	return out
}
