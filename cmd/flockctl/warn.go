package main

import (
	"fmt"
	"io"
	"net/netip"

	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/spec"
)

// warnSpec prints each allowance that names this host explicitly (the
// firewall allows it as written; a wide one never reaches the host).
func warnSpec(w io.Writer, f *spec.Flock) { warnSpecFor(w, f, hostAddrs()) }

// warnSpecFor is warnSpec on a host with addrs.
func warnSpecFor(w io.Writer, f *spec.Flock, addrs []netip.Addr) {
	for _, line := range f.Warnings(addrs) {
		fmt.Fprintln(w, "warning:", line)
	}
}

// hostAddrs are this host's own addresses now; none if they cannot be read
// (the warnings then cover the fixed host blocks only).
func hostAddrs() []netip.Addr {
	addrs, _ := proxy.HostAddrs()
	return addrs
}
