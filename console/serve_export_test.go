package console

import "net"

// ServeOn makes the console serve on ln instead of CONSOLE_ADDR: a test's virtual network, for
// a console inside a testing/synctest bubble. Call it instead of Listen, before Run.
func (s *Service) ServeOn(ln net.Listener) { s.server.UseListener(ln) }
