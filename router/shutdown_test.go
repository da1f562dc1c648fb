package router_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform/servicetest"
	"github.com/tributary-cdp/tributary/router"
	"github.com/tributary-cdp/tributary/schemas"
)

// A router whose broker disappeared stops within its ShutdownTimeout, in both modes.
func TestRouterStopsWithinShutdownTimeoutWhenTheBrokerIsGone(t *testing.T) {
	t.Parallel() // waits on processes, brokers and timeouts, not the CPU: overlaps with the others
	for _, exactlyOnce := range []bool{true, false} {
		t.Run(fmt.Sprintf("exactly-once=%v", exactlyOnce), func(t *testing.T) {
			t.Parallel()
			h := wrap(servicetest.New(t, servicetest.Options{Config: baseYAML, Closable: true, LogLevel: zerolog.ErrorLevel}))
			const grace = time.Second
			svc, _ := h.newRouter(func(cfg *router.Config) {
				cfg.ExactlyOnce = exactlyOnce
				cfg.TransactionalID = "test-router-shutdown"
				cfg.ShutdownTimeout = grace
			})
			stop, done := h.env.Go(svc.Run)

			// Events and a deletion request stream in until the broker disappears.
			var recs []*kgo.Record
			for i := range 200 {
				recs = append(recs, eventRecord(t, "web", `{"type":"track","event":"E","userId":"u`+strconv.Itoa(i)+`","messageId":"m`+strconv.Itoa(i)+`"}`))
			}
			del, err := json.Marshal(schemas.DeletionRequest{UserID: "u1", Kind: schemas.KindSuppressWithDelete, RequestID: "r1"})
			if err != nil {
				t.Fatal(err)
			}
			h.produce(append(recs, &kgo.Record{Topic: schemas.TopicDeletions, Key: []byte("u1"), Value: del})...)
			time.Sleep(500 * time.Millisecond)
			h.env.CloseBroker()
			time.Sleep(300 * time.Millisecond)
			took, err := servicetest.StopWithin(t, fmt.Sprintf("Run (ShutdownTimeout %s)", grace), stop, done, grace+5*time.Second)
			t.Logf("Run returned %s after the stop signal (ShutdownTimeout %s): %v", took, grace, err)
		})
	}
}
