package harness

// A private network for the machines of a multi-host test: a network
// namespace of the test's own (flock-net-<pid>-<n>) holding a bridge with
// the controller's address, and per machine a namespace of its own
// (flock-net-<pid>-<n>-<host>) with a veth into the bridge and an address
// on it, which the machine's nspawn joins (Options.NetworkNamespace)
// instead of --private-network. The host's own network is never touched:
// everything is inside namespaces the test made, removed by Close, and a
// crashed run's are removed by the next claim of the harness's directory
// (dirKind.claim, sweepNetns).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The network's addresses: the controller (the bridge, where a test runs
// ssh and Ansible) and the machines from NetFirst on, in one /24.
var (
	NetController = netip.MustParseAddr("10.77.0.1")
	NetFirst      = netip.MustParseAddr("10.77.0.11")
)

const (
	netBits   = 24
	netPrefix = "flock-net-"
	netnsDir  = "/run/netns"
	bridge    = "br0" // inside the net's own namespace: no clash with anyone's
)

var netSeq atomic.Int64

// netRe reads a namespace's name: its net (flock-net-<pid>-<n>) and, for
// a machine's, the host after it.
var netRe = regexp.MustCompile(`^(flock-net-[0-9]+-[0-9]+)(?:-(.+))?$`)

// Net is one private network. Its methods may be called from several
// goroutines.
type Net struct {
	instance
	ip string // path of ip(8)

	mu      sync.Mutex
	members map[string]netip.Addr // host -> address
	order   []string              // hosts in the order they joined
}

// NewNet makes a network: its namespace, the bridge in it with
// NetController/24, lo up. log receives progress lines; nil discards them.
// On error nothing is left behind.
func NewNet(log io.Writer) (*Net, error) {
	name := fmt.Sprintf("%s%d-%d", netPrefix, os.Getpid(), netSeq.Add(1))
	n := &Net{instance: instance{name: name, dir: filepath.Join(parentDir, name), dirs: netDirs, log: log},
		members: map[string]netip.Addr{}}
	if err := n.startOrTearDown(n.start, n.Close); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *Net) start() error {
	var err error
	if n.ip, err = exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w (apt-get install iproute2)", err)
	}
	// The directory first: it is what tells a live net's namespaces from
	// a crashed run's (sweepNetns).
	if err := n.claim(); err != nil {
		return err
	}
	ctrl := netip.PrefixFrom(NetController, netBits).String()
	return n.ipRun(
		[]string{"netns", "add", n.name},
		[]string{"-n", n.name, "link", "set", "lo", "up"},
		[]string{"-n", n.name, "link", "add", bridge, "type", "bridge"},
		[]string{"-n", n.name, "addr", "add", ctrl, "dev", bridge},
		[]string{"-n", n.name, "link", "set", bridge, "up"},
	)
}

// Name is the name of the network's own namespace (ip netns exec NAME).
func (n *Net) Name() string { return n.name }

// Path is its namespace's path.
func (n *Net) Path() string { return filepath.Join(netnsDir, n.name) }

// Attach makes host's namespace on the network with addr/24 on its eth0
// (a veth whose other end is in the bridge) and lo up, and returns its
// path for Options.NetworkNamespace. The namespace outlives the machine's
// boots (PowerOff, Reboot keep its address); Close removes it.
func (n *Net) Attach(host string, addr netip.Addr) (string, error) {
	if !nameRe.MatchString(host) {
		return "", fmt.Errorf("harness: net %s: host %q: want letters, digits and '-'", n.name, host)
	}
	if !netip.PrefixFrom(NetController, netBits).Masked().Contains(addr) || addr == NetController {
		return "", fmt.Errorf("harness: net %s: host %s: address %s is not a machine's of %s", n.name, host, addr, netip.PrefixFrom(NetController, netBits).Masked())
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for h, a := range n.members {
		if h == host || a == addr {
			return "", fmt.Errorf("harness: net %s: host %s (%s) is taken by %s (%s)", n.name, host, addr, h, a)
		}
	}
	ns := n.name + "-" + host
	veth := vethName(len(n.order)) // in the net's namespace; 15 bytes at most
	err := n.ipRun(
		[]string{"netns", "add", ns},
		[]string{"-n", ns, "link", "set", "lo", "up"},
		[]string{"-n", n.name, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
		[]string{"-n", n.name, "link", "set", veth, "master", bridge, "up"},
		[]string{"-n", ns, "addr", "add", netip.PrefixFrom(addr, netBits).String(), "dev", "eth0"},
		[]string{"-n", ns, "link", "set", "eth0", "up"},
	)
	// Recorded even on error: Close removes what part of it exists.
	n.members[host] = addr
	n.order = append(n.order, host)
	if err != nil {
		return "", fmt.Errorf("harness: net %s: attach %s: %w", n.name, host, err)
	}
	n.logf("net %s: host %s at %s (namespace %s)", n.name, host, addr, ns)
	return filepath.Join(netnsDir, ns), nil
}

// Command is argv run on the network as its controller: in the net's
// namespace, at NetController (ip netns exec).
func (n *Net) Command(ctx context.Context, argv ...string) *exec.Cmd {
	return exec.CommandContext(ctx, n.ip, append([]string{"netns", "exec", n.name}, argv...)...)
}

// Wrap is argv as Command runs it, for a caller that runs it itself.
func (n *Net) Wrap(argv ...string) []string {
	return append([]string{n.ip, "netns", "exec", n.name}, argv...)
}

// Close removes every namespace of the network (machines' first) and its
// directory. Close the machines on it first: a namespace a machine still
// runs in lives on until the machine is gone. Idempotent; nil is fine.
func (n *Net) Close() error {
	if n == nil {
		return nil
	}
	return n.close(func() error {
		n.mu.Lock()
		hosts := append([]string(nil), n.order...)
		n.mu.Unlock()
		var errs []error
		for _, h := range hosts {
			errs = append(errs, delNetns(n.name+"-"+h))
		}
		return errors.Join(append(errs, delNetns(n.name))...)
	})
}

// ipRun runs ip with each argument list in turn, stopping at the first
// failure.
func (n *Net) ipRun(cmds ...[]string) error {
	for _, args := range cmds {
		if out, err := exec.Command(n.ip, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// delNetns removes the namespace name if it exists (its veths go with
// it once nothing runs in it).
func delNetns(name string) error {
	if _, err := os.Lstat(filepath.Join(netnsDir, name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "ip", "netns", "del", name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns del %s: %w: %s", name, err, bytes.TrimSpace(out))
	}
	return nil
}

// sweepNetns removes the namespaces of nets whose directory is gone: a
// crashed run's (its directory was swept as stale just before, under the
// same lock). A live net made its directory before its namespaces and
// removes them before it, so it is never taken for a dead one.
func sweepNetns(logf func(string, ...any)) {
	ents, err := os.ReadDir(netnsDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		m := netRe.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		if _, err := os.Lstat(filepath.Join(parentDir, m[1])); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		err := delNetns(e.Name())
		logf("harness: removed stale network namespace %s (its net %s is gone): %v", e.Name(), m[1], err)
	}
}
