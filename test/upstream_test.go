package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/harness"
)

// upstreamCA is the test TLS server's certificate, its own root, which a
// client that verifies (the Node example, with NODE_EXTRA_CA_CERTS) trusts.
const upstreamCA = "/etc/flock-test-ca.pem"

// tlsUpstream starts the upstream of the egress-by-name tests: a TLS
// server at 192.0.2.10 (a documentation address) in a network namespace
// of its own inside machine m, behind a veth pair whose machine end is
// 192.0.2.1: an address outside this host, as an API's is. Names reach it
// through the machine's resolver (/etc/hosts): api., other. and
// evil.flock.test resolve to it, rebind.flock.test to 127.0.0.1 and
// host.flock.test to the machine's own end, 192.0.2.1, where a second
// server stands for a service of the host's own. Undone when t ends.
func tlsUpstream(t *testing.T, m *harness.Machine) {
	t.Helper()
	mustRun(t, m, "ip", "netns", "add", "flock-up")
	t.Cleanup(func() { run(t, m, "ip", "netns", "del", "flock-up") }) // takes the veth pair with it
	mustRun(t, m, "ip", "link", "add", "flock-up0", "type", "veth", "peer", "name", "flock-up1", "netns", "flock-up")
	mustRun(t, m, "ip", "addr", "add", "192.0.2.1/24", "dev", "flock-up0")
	mustRun(t, m, "ip", "link", "set", "flock-up0", "up")
	mustRun(t, m, "ip", "-n", "flock-up", "addr", "add", "192.0.2.10/24", "dev", "flock-up1")
	mustRun(t, m, "ip", "-n", "flock-up", "link", "set", "flock-up1", "up")
	mustRun(t, m, "ip", "-n", "flock-up", "link", "set", "lo", "up")
	mustRun(t, m, "sh", "-c", "cp /etc/hosts /etc/hosts.flock-test && printf '192.0.2.10 api.flock.test other.flock.test evil.flock.test\\n127.0.0.1 rebind.flock.test\\n192.0.2.1 host.flock.test\\n' >> /etc/hosts")
	t.Cleanup(func() { run(t, m, "mv", "/etc/hosts.flock-test", "/etc/hosts") })
	mustRun(t, m, "systemd-run", "--unit=flock-test-tls", "--collect", "-p", "NetworkNamespacePath=/run/netns/flock-up", probeBin, "tls-serve", "192.0.2.10:443", upstreamCA)
	t.Cleanup(func() {
		run(t, m, "systemctl", "stop", "flock-test-tls.service")
		run(t, m, "rm", "-f", upstreamCA)
	})
	// A service of the machine's own on its end of the pair, as a host's
	// dashboard on its public address: host.flock.test must not reach it
	// through the proxy, though root reaches it.
	mustRun(t, m, "systemd-run", "--unit=flock-test-host-tls", "--collect", probeBin, "tls-serve", "192.0.2.1:443")
	t.Cleanup(func() { run(t, m, "systemctl", "stop", "flock-test-host-tls.service") })
	m.Eventually(t, 10*time.Second, func() error {
		for _, addr := range []string{"192.0.2.10:443", "192.0.2.1:443"} {
			out, _, _ := run(t, m, probeBin, "attempt", `{"op":"connect-tcp","addr":"`+addr+`"}`)
			if !strings.Contains(out, `"ok":true`) {
				return fmt.Errorf("test TLS server on %s not up: %s", addr, out)
			}
		}
		if _, err := m.ReadFile(upstreamCA); err != nil {
			return fmt.Errorf("test TLS server's certificate: %v", err)
		}
		return nil
	})
}
