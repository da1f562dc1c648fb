package platform

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// The Host check (docs/security.md#dns-rebinding). A web page can make a browser send requests
// to any address: after it re-points its own name at a service's address (127.0.0.1, a pod's
// IP), the browser sends them with the page's name as Host and lets the page read the answers.
// A service that answers only the names it is known by ends that: the page's name is not one
// of them. The check guards the service's own handler; /healthz, /readyz and /metrics, which
// kubelet probes and Prometheus reach by the pod's address, answer whatever the Host.

// loopbackNames are always accepted: a browser sends them only to a page of the same name,
// never to another site's page.
var loopbackNames = []string{"localhost", "127.0.0.1", "::1"}

// hostCheck is the set of host names an HTTPServer's app answers to.
type hostCheck struct {
	// variable names the setting in refusals ("" when the service has none).
	variable string
	any      bool
	exact    map[string]bool
	suffixes []string // ".example.com" of "*.example.com"
}

// defaultHostCheck is the check of a server listening on addr whose service sets no names:
// the loopback names when addr is on loopback (`make run`, a laptop: the addresses a rebinding
// page aims at), any name otherwise (a container on 0.0.0.0 is reached by names it cannot
// know; the deploy files set them).
func defaultHostCheck(addr string) *hostCheck {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if !isLoopbackHost(host) {
		return &hostCheck{any: true}
	}
	return newHostCheck("", nil)
}

// isLoopbackHost says whether a listen address's host is a loopback address or "localhost".
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && a.IsLoopback()
}

// newHostCheck builds the check of valid names (ValidateAllowedHosts), plus the loopback names.
func newHostCheck(variable string, names []string) *hostCheck {
	c := &hostCheck{variable: variable, exact: map[string]bool{}}
	for _, n := range append(names, loopbackNames...) {
		n = normalizeHost(n)
		switch {
		case n == "*":
			c.any = true
		case strings.HasPrefix(n, "*."):
			c.suffixes = append(c.suffixes, n[1:])
		default:
			c.exact[n] = true
		}
	}
	return c
}

// normalizeHost lower-cases a host name and drops a final dot and IPv6 brackets.
func normalizeHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
}

// allows says whether the Host header hostport (with or without a port) is one of the names.
func (c *hostCheck) allows(hostport string) bool {
	if c.any {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = normalizeHost(host)
	if host == "" {
		return false
	}
	if c.exact[host] {
		return true
	}
	for _, s := range c.suffixes {
		if strings.HasSuffix(host, s) && len(host) > len(s) {
			return true
		}
	}
	return false
}

// wrap answers 421 Misdirected Request to a request whose Host is not one of the names.
func (c *hostCheck) wrap(next http.Handler) http.Handler {
	if c.any {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.allows(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		msg := fmt.Sprintf("host %q is not a name this service answers to", r.Host)
		if c.variable != "" {
			msg += "; add it to " + c.variable
		} else {
			msg += " (it listens on loopback: use localhost or 127.0.0.1)"
		}
		body, _ := json.Marshal(map[string]string{"code": "misdirected_request", "message": msg})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusMisdirectedRequest)
		_, _ = w.Write(append(body, '\n'))
	})
}

// ValidateAllowedHosts checks the value of an ALLOWED_HOSTS setting (variable names it in the
// errors): each entry is a host name, an IP address (IPv6 with or without brackets), *.<name>
// (any name under it), or * (any name); without a port, scheme or path.
func ValidateAllowedHosts(variable string, names []string) error {
	var errs []error
	for _, n := range names {
		if err := validHostPattern(n); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q %w", variable, n, err))
		}
	}
	return errors.Join(errs...)
}

func validHostPattern(n string) error {
	if n == "*" {
		return nil
	}
	if strings.Contains(n, "://") || strings.Contains(n, "/") {
		return errors.New("is not a host name: give the name alone, without a scheme or path")
	}
	if strings.HasPrefix(n, "[") || strings.Contains(n, "::") || strings.Count(n, ":") > 1 {
		if !strings.HasPrefix(n, "[") || strings.HasSuffix(n, "]") {
			if a, err := netip.ParseAddr(strings.Trim(n, "[]")); err == nil && a.Is6() {
				return nil
			}
		}
		return errors.New("is not an IPv6 address")
	}
	if strings.Contains(n, ":") {
		return errors.New("has a port: give the host name alone (any port is accepted)")
	}
	if _, err := netip.ParseAddr(n); err == nil {
		return nil
	}
	name := strings.TrimSuffix(n, ".")
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		name = rest
	}
	if name == "" {
		return errors.New("is not a host name")
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return errors.New("is not a host name (a wildcard is *.<name>)")
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return errors.New("is not a host name (a wildcard is *.<name>)")
			}
		}
	}
	return nil
}
