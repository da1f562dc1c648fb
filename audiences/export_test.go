package audiences

import (
	"net"
	"net/http"
)

// ServeOn makes the service serve its profile API on ln instead of AUDIENCES_ADDR, and ask its
// peers through peers: a test's virtual network, for a service inside a testing/synctest
// bubble. Call it instead of Listen, before Run.
func (s *Service) ServeOn(ln net.Listener, peers http.RoundTripper) {
	s.server.UseListener(ln)
	s.peers.Transport = peers
}

// ExtKey is the key of an external id's entry (its partition is the partition of this key).
var ExtKey = extKey
