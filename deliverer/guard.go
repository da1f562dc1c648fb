package deliverer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrBlockedAddress is returned (wrapped) when the address guard refuses a connection.
var ErrBlockedAddress = errors.New("address refused by the private-address guard")

// blockedPrefixes are refused beside what netip's predicates catch: shared address space
// (carrier-grade NAT; Alibaba Cloud's metadata service is 100.100.100.200), IETF protocol
// assignments, benchmarking, reserved, "this network", and AWS's IPv6 metadata address.
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("fd00:ec2::254/128"),
	netip.MustParsePrefix("64:ff9b::/96"),   // NAT64 can reach any IPv4 address, private included
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64 (RFC 8215), likewise
}

// embeddedIPv4 returns the IPv4 addresses an IPv6 address carries and that a relay or the
// stack may reach instead: 6to4 (2002:V4ADDR::/48), Teredo (2001:0::/32: the server's address,
// and the client's, inverted) and the deprecated IPv4-compatible form (::a.b.c.d).
func embeddedIPv4(ip netip.Addr) []netip.Addr {
	if !ip.Is6() || ip.Is4In6() {
		return nil
	}
	b := ip.As16()
	v4 := func(x []byte) netip.Addr { return netip.AddrFrom4([4]byte{x[0], x[1], x[2], x[3]}) }
	switch {
	case b[0] == 0x20 && b[1] == 0x02: // 6to4
		return []netip.Addr{v4(b[2:6])}
	case b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0: // Teredo
		client := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
		return []netip.Addr{v4(b[4:8]), netip.AddrFrom4(client)}
	case [12]byte(b[:12]) == [12]byte{}: // ::a.b.c.d
		return []netip.Addr{v4(b[12:16])}
	}
	return nil
}

// BlockedAddr reports why ip may not be dialled by a webhook, or "" when it may: loopback,
// private (RFC 1918, fc00::/7), link-local (169.254.0.0/16 — cloud metadata services — and
// fe80::/10), multicast, unspecified, and the ranges of blockedPrefixes.
func BlockedAddr(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid():
		return "invalid address"
	case ip.IsLoopback():
		return "loopback address"
	case ip.IsPrivate():
		return "private address"
	case ip.IsLinkLocalUnicast():
		return "link-local address (cloud metadata)"
	case ip.IsMulticast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast address"
	case ip.IsUnspecified():
		return "unspecified address"
	}
	for _, p := range blockedPrefixes {
		if p.Contains(ip) {
			return "reserved address " + p.String()
		}
	}
	for _, v4 := range embeddedIPv4(ip) {
		if why := BlockedAddr(v4); why != "" {
			return "IPv6 address embedding " + v4.String() + ", a " + why
		}
	}
	if ownAddrs.has(ip) {
		return "address of this host"
	}
	return ""
}

// ownAddrs are this host's own interface addresses, public ones included: a webhook to them
// would reach the deliverer's neighbours (its metrics port, a sidecar). Read again at most every
// ownAddrsTTL, on a dial.
var ownAddrs = &hostAddrs{}

const ownAddrsTTL = 30 * time.Second

type hostAddrs struct {
	mu    sync.Mutex
	at    time.Time
	addrs map[netip.Addr]bool
}

func (h *hostAddrs) has(ip netip.Addr) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now := time.Now(); h.addrs == nil || now.Sub(h.at) > ownAddrsTTL {
		h.at, h.addrs = now, map[netip.Addr]bool{}
		if ifAddrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range ifAddrs {
				if p, err := netip.ParsePrefix(a.String()); err == nil {
					h.addrs[p.Addr().Unmap()] = true
				}
			}
		}
	}
	return h.addrs[ip]
}

// oddIPv4 reports whether host is an IPv4 address in a spelling other than dotted decimal with
// four parts — a number ("2130706433"), hexadecimal ("0x7f000001"), octal ("0177.0.0.1") or
// fewer parts ("127.1") — which C resolvers, proxies and some HTTP stacks read as an address.
// No real host name looks like that (a top-level domain is never numeric), so such a URL is
// refused at once rather than tried as a name.
func oddIPv4(host string) bool {
	if _, err := netip.ParseAddr(host); err == nil {
		return false // a canonical address: the guard checks it after resolution
	}
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return false
	}
	for _, p := range parts {
		q := strings.ToLower(p)
		digits, base := q, 10
		switch {
		case q == "":
			return false
		case strings.HasPrefix(q, "0x"):
			digits, base = q[2:], 16
		case len(q) > 1 && q[0] == '0':
			base = 8
		}
		if _, err := strconv.ParseUint(digits, base, 32); err != nil && digits != "" {
			return false
		}
	}
	return true
}

// guardDial wraps dial. A host written as an absolute name with a trailing dot — "127.0.0.1.",
// "localhost." — is the same host to DNS, to browsers' URL parsers and to many HTTP stacks, so an
// address with a trailing dot is dialled as the address (not looked up: a lookup fails, and
// would be retried as a connection failure for hours). With guard (WEBHOOK_ALLOW_PRIVATE off),
// before any lookup it refuses a blocked address (BlockedAddr), a host spelled as an odd IPv4
// address and the names localhost and *.localhost, which always mean loopback (RFC 6761)
// whatever DNS says, with or without the trailing dot; guardControl checks every address
// actually dialled, after resolution.
func guardDial(dial func(ctx context.Context, network, addr string) (net.Conn, error), guard bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return dial(ctx, network, addr)
		}
		bare := strings.TrimSuffix(host, ".")
		ip, ipErr := netip.ParseAddr(bare)
		if ipErr == nil && bare != host {
			addr = net.JoinHostPort(bare, port)
		}
		if !guard {
			return dial(ctx, network, addr)
		}
		switch name := strings.ToLower(bare); {
		case ipErr == nil && BlockedAddr(ip) != "":
			return nil, fmt.Errorf("%w: %s is a %s", ErrBlockedAddress, host, BlockedAddr(ip))
		case oddIPv4(bare):
			return nil, fmt.Errorf("%w: %s is an IPv4 address in an unusual spelling", ErrBlockedAddress, host)
		case name == "localhost" || strings.HasSuffix(name, ".localhost"):
			return nil, fmt.Errorf("%w: %s is a loopback name", ErrBlockedAddress, host)
		}
		return dial(ctx, network, addr)
	}
}

// guardControl is a net.Dialer Control function: it runs after DNS resolution, on the address
// actually dialled, so a name that resolves (or re-resolves: DNS rebinding) to a private
// address is refused too.
func guardControl(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrBlockedAddress, address)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %s is not an IP address", ErrBlockedAddress, host)
	}
	if why := BlockedAddr(ip); why != "" {
		return fmt.Errorf("%w: %s is a %s", ErrBlockedAddress, ip, why)
	}
	return nil
}
