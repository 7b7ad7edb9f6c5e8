package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/harness"
)

// tlsUpstream starts the upstream of the egress-by-name tests: a TLS
// server on a documentation address of machine m's loopback, reached by
// name through its resolver (/etc/hosts): api., other. and evil.flock.test
// resolve to it, rebind.flock.test to 127.0.0.1. An agent cannot connect
// there itself (a host address); the proxy can. Undone when t ends.
func tlsUpstream(t *testing.T, m *harness.Machine) {
	t.Helper()
	mustRun(t, m, "ip", "addr", "add", "192.0.2.10/32", "dev", "lo")
	t.Cleanup(func() { run(t, m, "ip", "addr", "del", "192.0.2.10/32", "dev", "lo") })
	mustRun(t, m, "sh", "-c", "cp /etc/hosts /etc/hosts.flock-test && printf '192.0.2.10 api.flock.test other.flock.test evil.flock.test\\n127.0.0.1 rebind.flock.test\\n' >> /etc/hosts")
	t.Cleanup(func() { run(t, m, "mv", "/etc/hosts.flock-test", "/etc/hosts") })
	mustRun(t, m, "systemd-run", "--unit=flock-test-tls", "--collect", probeBin, "tls-serve", "192.0.2.10:443")
	t.Cleanup(func() { run(t, m, "systemctl", "stop", "flock-test-tls.service") })
	m.Eventually(t, 10*time.Second, func() error {
		out, _, _ := run(t, m, probeBin, "attempt", `{"op":"connect-tcp","addr":"192.0.2.10:443"}`)
		if !strings.Contains(out, `"ok":true`) {
			return fmt.Errorf("test TLS server not up: %s", out)
		}
		return nil
	})
}
