package servicetest

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback address ("127.0.0.1:port") whose port was free at the time of
// the call, for a server the test starts later (or names before it starts, as a peer URL).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
