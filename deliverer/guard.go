package deliverer

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
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
	netip.MustParsePrefix("64:ff9b::/96"), // NAT64 can reach any IPv4 address, private included
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
	return ""
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
