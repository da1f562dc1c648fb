package ingest

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tributary-cdp/tributary/platform"
)

// freezableNet dials real connections whose reads and writes block while the network is frozen
// (as a broker stopped with SIGSTOP looks: the connection stays open, nothing answers).
type freezableNet struct {
	mu     sync.Mutex
	frozen chan struct{} // closed: not frozen
}

func newFreezableNet() *freezableNet {
	n := &freezableNet{frozen: make(chan struct{})}
	close(n.frozen)
	return n
}

func (n *freezableNet) freeze() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.frozen = make(chan struct{})
}

func (n *freezableNet) thaw() {
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case <-n.frozen:
	default:
		close(n.frozen)
	}
}

func (n *freezableNet) wait() {
	n.mu.Lock()
	ch := n.frozen
	n.mu.Unlock()
	<-ch
}

func (n *freezableNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &freezableConn{Conn: c, net: n}, nil
}

type freezableConn struct {
	net.Conn
	net *freezableNet
}

func (c *freezableConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.net.wait() // an answer that arrives while frozen is held back
	return n, err
}

func (c *freezableConn) Write(b []byte) (int, error) {
	c.net.wait()
	return c.Conn.Write(b)
}

// TestProduceTimeoutHoldsWhenTheBrokerFreezes: the broker stops answering (frozen, not gone).
// Requests used to hang for as long as franz-go waited for the produce request in flight (20 s
// and more), then get a 200 after their clients had given up; now each is answered 503 with
// Retry-After at INGEST_PRODUCE_TIMEOUT, and once the broker answers again, requests succeed.
func TestProduceTimeoutHoldsWhenTheBrokerFreezes(t *testing.T) {
	if testing.Short() {
		t.Skip("seconds of real time")
	}
	network := newFreezableNet()
	h := newHarnessWith(t, Deps{Deps: platform.Deps{KafkaOpts: []kgo.Opt{kgo.Dialer(network.dial)}}}, func(c *Config) { c.ProduceTimeout = time.Second })
	track := []byte(`{"type":"track","event":"Signed Up","userId":"u1"}`)
	if status, resp := h.post("/v1/track", track, basic(testKey)); status != http.StatusOK {
		t.Fatalf("before the freeze: %d %s", status, resp)
	}
	network.freeze()
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			status, resp := h.post("/v1/track", track, basic(testKey))
			if took := time.Since(start); status != http.StatusServiceUnavailable || took > 2500*time.Millisecond {
				t.Errorf("during the freeze: %d after %v (%s), want 503 within INGEST_PRODUCE_TIMEOUT (1s) and a little", status, took.Round(time.Millisecond), resp)
			}
		}()
	}
	wg.Wait()
	network.thaw()
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, _ := h.post("/v1/track", track, basic(testKey))
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the freeze: still %d", status)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
