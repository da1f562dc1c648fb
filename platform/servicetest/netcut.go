package servicetest

import (
	"context"
	"errors"
	"net"
	"sync"
)

// NetCut is one client's network to Kafka, which a test can cut (kgo.Dialer(n.Dial)): Cut closes
// every connection and refuses new ones, so that client finds Kafka unreachable while the broker
// keeps serving everyone else (the test's own clients, a next service); Restore lets it dial
// again. Its zero value is an uncut network.
type NetCut struct {
	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

// Dial connects unless the network is cut.
func (n *NetCut) Dial(ctx context.Context, network, host string) (net.Conn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused: network to Kafka cut by the test")}
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, host)
	if err == nil {
		n.conns = append(n.conns, c)
	}
	return c, err
}

// Cut closes every connection and refuses new ones until Restore.
func (n *NetCut) Cut() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = true
	for _, c := range n.conns {
		_ = c.Close()
	}
	n.conns = nil
}

// Restore lets Dial connect again.
func (n *NetCut) Restore() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down = false
}
