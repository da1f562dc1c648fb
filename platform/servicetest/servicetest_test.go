package servicetest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/schemas"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testYAML = `
sources: [{id: web, writeKey: wk_web}]
destinations:
  - {id: orders, type: webhooks, sources: [web], settings: {webhooks: [{url: "https://orders.example.com/hook"}]}}
`

// recorder stands in for a testing.TB to see what a helper reports.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// exercise checks an Env end to end: config, topics, produce, read, settle.
func exercise(t *testing.T, e *servicetest.Env) {
	if _, ok := e.Store.Snapshot().DestinationByID("orders"); !ok {
		t.Fatal("the config store is ready without the applied config")
	}
	e.Apply(strings.Replace(testYAML, "orders", "growth", -1))
	ctx, cancel := context.WithTimeout(e.Ctx, 5*time.Second)
	defer cancel()
	if _, err := e.Store.WaitFor(ctx, func(s *platform.Snapshot) bool { _, ok := s.DestinationByID("growth"); return ok }); err != nil {
		t.Fatalf("applied config not seen by the store: %v", err)
	}

	retry := e.Reader("webhooks.retry.1s") // the tier named by the default schedule
	if n := retry.Poll(); n != 0 {
		t.Fatalf("read %d records of an empty retry tier", n)
	}
	r := e.Reader(schemas.TopicDeliveries)
	r.Settle = time.Second
	e.Produce(&kgo.Record{Topic: schemas.TopicDeliveries, Value: []byte("1"), Headers: []kgo.RecordHeader{{Key: "k", Value: []byte("a")}, {Key: "k", Value: []byte("b")}}})
	e.Produce(&kgo.Record{Topic: schemas.TopicDeliveries, Value: []byte("2")})
	got := r.WaitFor(1, 10*time.Second) // the settle period catches the second record
	if len(got) != 2 {
		t.Fatalf("WaitFor(1) with a settle period read %d records, want 2", len(got))
	}
	if h := servicetest.Header(got[0], "k"); h != "a" {
		t.Errorf("Header = %q, want the first value", h)
	}
	if h := servicetest.Header(got[1], "k"); h != "" {
		t.Errorf("Header of a record without it = %q", h)
	}
}

func TestEnv(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{Config: testYAML})
	exercise(t, e)
}

// Inside a synctest bubble, on the virtual network: the same, and waits are virtual.
func TestEnvVirtual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := servicetest.New(t, servicetest.Options{Config: testYAML, Virtual: true})
		if len(e.KafkaOpts) == 0 || e.Network == nil {
			t.Fatal("a virtual Env has no dialer")
		}
		exercise(t, e)
		r := e.Reader(schemas.TopicDeliveries)
		r.Settle = 10 * time.Second
		start := time.Now()
		if got := r.WaitFor(2, time.Minute); len(got) != 2 {
			t.Fatalf("read %d records, want 2", len(got))
		}
		if took := time.Since(start); took < 10*time.Second {
			t.Fatalf("WaitFor returned after %v, before its settle period", took)
		}
		// A server on the virtual network (Listen) answers the Env's client (Get, Post).
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, `{"got":%q}`, r.Method+" "+r.Header.Get("Authorization")+" "+string(b))
		})}
		ln := e.Listen(8100)
		served := make(chan struct{})
		go func() { defer close(served); _ = srv.Serve(ln) }()
		defer func() { _ = srv.Close(); <-served }()
		var got struct{ Got string }
		if status := e.Get("http://localhost:8100/x", "tok", &got); status != http.StatusOK || got.Got != "GET Bearer tok " {
			t.Errorf("Get on the virtual network: %d %+v", status, got)
		}
		if status := e.Post("http://localhost:8100/x", "", `{"a":1}`, &got); status != http.StatusOK || got.Got != `POST  {"a":1}` {
			t.Errorf("Post on the virtual network: %d %+v", status, got)
		}
	})
}

func TestStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{TB: t}
		e := &servicetest.Env{T: rec, Ctx: t.Context()}
		ran := make(chan struct{})
		stop := e.Start("svc", func(ctx context.Context) error {
			close(ran)
			<-ctx.Done()
			return errors.New("boom")
		})
		<-ran
		stop()
		stop()
		if want := []string{"svc: boom"}; fmt.Sprint(rec.errors) != fmt.Sprint(want) {
			t.Fatalf("errors %q, want %q (once)", rec.errors, want)
		}
	})
}

func TestCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "h"}, []string{"a", "b"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "h"})
	reg.MustRegister(c, g)
	c.WithLabelValues("x", "1").Add(2)
	c.WithLabelValues("x", "2").Add(3)
	c.WithLabelValues("y", "1").Add(5)
	g.Set(7)
	for _, tt := range []struct {
		name string
		kv   []string
		want float64
	}{
		{"c_total", nil, 10},
		{"c_total", []string{"a", "x"}, 5},
		{"c_total", []string{"a", "x", "b", "2"}, 3},
		{"c_total", []string{"a", "z"}, 0},
		{"g", nil, 7},
		{"missing", nil, 0},
	} {
		t.Run(tt.name+fmt.Sprint(tt.kv), func(t *testing.T) {
			if got := servicetest.Counter(t, reg, tt.name, tt.kv...); got != tt.want {
				t.Errorf("Counter = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReceiver(t *testing.T) {
	rc := servicetest.NewReceiver(t, func(n int, _ *http.Request, w http.ResponseWriter) { w.WriteHeader(200 + n) })
	for i := range 2 {
		resp, err := http.Post(rc.URL+"/hook", "text/plain", strings.NewReader(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 201+i {
			t.Errorf("request %d answered %d", i+1, resp.StatusCode)
		}
	}
	got := rc.WaitRequests(t, 2, 5*time.Second)
	if len(got) != 2 || string(got[1].Body) != "1" || got[0].Path != "/hook" || got[0].Method != http.MethodPost ||
		got[0].Header.Get("Content-Type") != "text/plain" || got[1].At.Before(got[0].At) {
		t.Fatalf("requests %+v", got)
	}
	http.DefaultClient.CloseIdleConnections()
}
