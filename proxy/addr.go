package proxy

import (
	"net"
	"net/netip"
)

// addrPort is a TCP address as netip (zero for anything else).
func addrPort(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.AddrPort()
	}
	return netip.AddrPort{}
}
