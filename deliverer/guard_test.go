package deliverer

import (
	"context"
	"errors"
	"net"
	"testing"
)

// TestTrailingDotHostsGoThroughTheGuard: a host written as an absolute name — "127.0.0.1.",
// "localhost." — is the same host to DNS, to browsers' URL parsers and to many HTTP stacks. The
// guard refuses it at once as blocked_address, as it refuses the host without the dot, instead
// of a lookup that fails (a connection failure, retried for hours). A trailing-dot address is
// dialled as the address; the names localhost and *.localhost (loopback, RFC 6761) are refused
// before any lookup; other names are dialled as written. Before, "127.0.0.1." and "localhost."
// were looked up in DNS and retried as connection failures.
func TestTrailingDotHostsGoThroughTheGuard(t *testing.T) {
	var dialled []string
	fake := func(_ context.Context, _, addr string) (net.Conn, error) {
		dialled = append(dialled, addr)
		return nil, errors.New("dialled")
	}
	guarded, open := guardDial(fake, true), guardDial(fake, false)
	for _, addr := range []string{
		"127.0.0.1.:80", "10.0.0.1.:443", "169.254.169.254.:80", "localhost.:8080", "localhost:8080", "LocalHost.:80",
		"api.localhost:80", "api.localhost.:80", "2130706433.:80", "127.1.:80", "0x7f000001.:80",
	} {
		dialled = nil
		_, err := guarded(context.Background(), "tcp", addr)
		if !errors.Is(err, ErrBlockedAddress) || len(dialled) > 0 {
			t.Errorf("guarded dial(%s) = %v (dialled %v), want ErrBlockedAddress before any lookup", addr, err, dialled)
		}
		if c := classifyError(err); c != Blocked {
			t.Errorf("guarded dial(%s) classifies as %s, want %s", addr, c, Blocked)
		}
	}
	for addr, want := range map[string]string{
		"8.8.8.8.:443":             "8.8.8.8:443", // an address: dialled as one, not looked up
		"hooks.example.com.:443":   "hooks.example.com.:443",
		"hooks.example.com:443":    "hooks.example.com:443",
		"notlocalhost.example:443": "notlocalhost.example:443",
	} {
		dialled = nil
		if _, _ = guarded(context.Background(), "tcp", addr); len(dialled) != 1 || dialled[0] != want {
			t.Errorf("guarded dial(%s) dialled %v, want %s", addr, dialled, want)
		}
	}
	// WEBHOOK_ALLOW_PRIVATE: nothing is refused, and a trailing-dot address is still an address.
	for addr, want := range map[string]string{"127.0.0.1.:80": "127.0.0.1:80", "localhost.:80": "localhost.:80", "[::1]:80": "[::1]:80"} {
		dialled = nil
		if _, _ = open(context.Background(), "tcp", addr); len(dialled) != 1 || dialled[0] != want {
			t.Errorf("unguarded dial(%s) dialled %v, want %s", addr, dialled, want)
		}
	}
}
