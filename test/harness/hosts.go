package harness

// Several machines as the hosts of a multi-host test: each on one private
// network (net.go) with an address of its own and sshd (sshd.go), and the
// test as their controller, in the network's namespace at NetController,
// where it runs ssh and Ansible as an operator would.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Hosts are the machines of one private network, by host name.
type Hosts struct {
	Net        *Net
	Key        SSHKey // root's key on every machine
	KnownHosts string // every machine's host key at its address

	names    []string
	machines map[string]*Machine
	addrs    map[string]netip.Addr
}

// BootHosts boots one machine per name, in parallel, on a new private
// network: the i-th at NetFirst+i, with sshd taking a key the test made.
// o applies to every machine (its Name, NetworkNamespace and
// AuthorizedKeys are set here). It skips or fails t by the tier rule
// (NspawnTier, HostsTier); everything is torn down when t ends, machines
// first, then the network.
func BootHosts(t testing.TB, names []string, o Options) *Hosts {
	t.Helper()
	requireBoot(t, NspawnTier, "boots systemd machines")
	HostsTier.Require(t)
	if o.Log == nil {
		o.Log = testLog{t}
	}
	dir := t.TempDir()
	key, err := NewSSHKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	n, err := NewNet(o.Log)
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs after every machine's teardown.
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("%v", err)
		}
	})
	h := &Hosts{Net: n, Key: key, KnownHosts: filepath.Join(dir, "known_hosts"),
		machines: map[string]*Machine{}, addrs: map[string]netip.Addr{}}
	opts := map[string]Options{}
	addr := NetFirst
	for _, name := range names {
		path, err := n.Attach(name, addr)
		if err != nil {
			t.Fatal(err)
		}
		mo := o
		mo.Name = fmt.Sprintf("flock-%d-%d-%s", os.Getpid(), seq.Add(1), name)
		mo.NetworkNamespace = path
		mo.AuthorizedKeys = key.Public
		opts[name] = mo
		h.names = append(h.names, name)
		h.addrs[name] = addr
		addr = addr.Next()
	}

	t0 := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := Start(context.Background(), opts[name])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("host %s: %w", name, err))
				return
			}
			h.machines[name] = m
		}()
	}
	wg.Wait()
	for _, name := range names {
		if m := h.machines[name]; m != nil {
			closeAtEnd(t, m, 30*time.Second)
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("boot: %v", err)
	}

	var known bytes.Buffer
	for _, name := range names {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		key, err := h.machines[name].sshdUp(ctx)
		cancel()
		if err != nil {
			t.Fatalf("host %s: %v", name, err)
		}
		f := strings.Fields(key)
		if len(f) < 2 {
			t.Fatalf("host %s: host key %q", name, key)
		}
		fmt.Fprintf(&known, "%s %s %s\n", h.addrs[name], f[0], f[1])
	}
	if err := os.WriteFile(h.KnownHosts, known.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d hosts booted on %s in %v: %s", len(names), n.Name(), time.Since(t0).Round(time.Millisecond), h)
	return h
}

// String lists the hosts with their addresses and machines.
func (h *Hosts) String() string {
	var s []string
	for _, name := range h.names {
		s = append(s, fmt.Sprintf("%s=%s (%s)", name, h.addrs[name], h.machines[name].Name()))
	}
	return strings.Join(s, ", ")
}

// Names are the hosts' names in the order they were booted.
func (h *Hosts) Names() []string { return append([]string(nil), h.names...) }

// Machine is host name's machine; nil if there is no such host.
func (h *Hosts) Machine(name string) *Machine { return h.machines[name] }

// Addr is host name's address on the network.
func (h *Hosts) Addr(name string) netip.Addr { return h.addrs[name] }

// Target is how the controller reaches host name with ssh or Ansible.
func (h *Hosts) Target(name string) SSHTarget {
	return SSHTarget{Host: h.addrs[name].String(), Port: 22, User: "root", KeyFile: h.Key.File, KnownHostsFile: h.KnownHosts}
}

// SSH runs argv on host name as root over ssh from the controller (in the
// network's namespace), each argument as given, with the machine's clean
// environment (runEnv). err is a *RunError when the command fails; exit
// status 255 is also ssh's own failure.
func (h *Hosts) SSH(ctx context.Context, name string, argv ...string) (stdout, stderr string, err error) {
	addr, ok := h.addrs[name]
	if !ok {
		return "", "", &RunError{Machine: name, Argv: argv, ExitCode: -1, Err: errNoHost}
	}
	if len(argv) == 0 {
		return "", "", &RunError{Machine: name, ExitCode: -1, Err: errors.New("empty argv")}
	}
	remote := "exec env -i " + shellJoin(runEnv) + " " + shellJoin(argv)
	args := append(sshOptions(h.Key.File, h.KnownHosts), addr.String(), remote)
	cmd := h.Net.Command(ctx, append([]string{"ssh"}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = 2 * time.Second
	err = runError(ctx, "controller->"+name, argv, cmd.Run(), errOut.String())
	return out.String(), errOut.String(), err
}
