package deliverer_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tributary-cdp/tributary/deliverer"
	"github.com/tributary-cdp/tributary/platform"
	"github.com/tributary-cdp/tributary/schemas"
)

// lockedBuffer is a log sink the deliverer's goroutines may write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type noDestinations struct{}

func (noDestinations) DestinationByID(string) (*schemas.Destination, bool) { return nil, false }

// TestAllowPrivateWarnedAtStart: WEBHOOK_ALLOW_PRIVATE=true (make run, compose) turns the
// address guard off; the deliverer says so at start in a warning line that names the setting,
// and says nothing of it when the guard is on (docs/security.md#webhook-delivery).
func TestAllowPrivateWarnedAtStart(t *testing.T) {
	for _, allow := range []bool{true, false} {
		var logs lockedBuffer
		cfg := deliverer.DefaultConfig()
		cfg.AllowPrivate = allow
		svc, err := deliverer.New(cfg, deliverer.Deps{
			Deps: platform.Deps{
				Kafka:  platform.KafkaSettings{Brokers: []string{"127.0.0.1:1"}, ReplicationFactor: -1, Partitions: 1},
				Logger: zerolog.New(&logs),
			},
			Config: func() deliverer.Destinations { return noDestinations{} },
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = svc.Run(ctx) // closes the Kafka client
		var warning string
		for line := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(line, "WEBHOOK_ALLOW_PRIVATE") {
				warning = line
			}
		}
		switch {
		case allow && (!strings.Contains(warning, `"level":"warn"`) || !strings.Contains(warning, "address guard is off")):
			t.Errorf("WEBHOOK_ALLOW_PRIVATE=true: no warning line naming it at start; logs:\n%s", logs.String())
		case !allow && warning != "":
			t.Errorf("WEBHOOK_ALLOW_PRIVATE=false: %s", warning)
		}
	}
}
