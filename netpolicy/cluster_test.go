package netpolicy

// Tier: unit (the policy of a multi-host flock); root (netns) for
// TestKernelCluster, real traffic between network namespaces it creates.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/internal/golden"
	"github.com/flockrun/flock/spec"
)

func TestForFlockCluster(t *testing.T) {
	hosts := []spec.Host{
		{Name: "b", Address: netip.MustParseAddr("::ffff:10.77.0.12")}, // unmapped
		{Name: "a", Address: netip.MustParseAddr("10.77.0.11")},
	}
	bus := spec.Bus{Host: "127.0.0.1", Port: 4222}
	agents := []spec.Agent{{ID: 1}}
	single := ForFlock(&spec.Flock{UIDBase: spec.DefaultUIDBase, Bus: bus, Agents: agents})

	// One host listed is one host: the same policy, hash and table as none.
	one := ForFlock(&spec.Flock{UIDBase: spec.DefaultUIDBase, Bus: bus, Agents: agents, Hosts: hosts[1:]})
	if one.Cluster != nil || one.String() != single.String() || one.Hash() != single.Hash() {
		t.Errorf("one host: cluster %+v, policy\n%s\nwant\n%s", one.Cluster, one, single)
	}

	got := ForFlock(&spec.Flock{UIDBase: spec.DefaultUIDBase, Bus: bus, Agents: agents, Hosts: hosts})
	want := &Cluster{Port: spec.DefaultClusterPort, Peers: []netip.Addr{netip.MustParseAddr("10.77.0.11"), netip.MustParseAddr("10.77.0.12")}}
	if got.Cluster == nil || fmt.Sprint(*got.Cluster) != fmt.Sprint(*want) {
		t.Errorf("two hosts, default port: cluster %+v, want %+v", got.Cluster, want)
	}
	if got.Hash() == single.Hash() || !strings.HasSuffix(got.String(), "cluster port 6222\ncluster peer 10.77.0.11\ncluster peer 10.77.0.12\n") {
		t.Errorf("the cluster is not part of the policy's text:\n%s", got)
	}
	bus.ClusterPort = 7222
	if p := ForFlock(&spec.Flock{UIDBase: spec.DefaultUIDBase, Bus: bus, Hosts: hosts}); p.Cluster.Port != 7222 {
		t.Errorf("cluster_port 7222: port %d", p.Cluster.Port)
	}
	// A multi-host flock's agents have a single host's output rules, and
	// before them the refusals of the cluster port, which no allowance
	// overrides: the peers' addresses, then this host's.
	for _, uid := range single.AgentUIDs {
		a, _ := PlannedRulesFor(single, uid)
		b, _ := PlannedRulesFor(got, uid)
		refusals := []string{
			`meta skuid @agents ip daddr @cluster_peers4 tcp dport 6222 counter name "denied" update @refused { meta skuid counter } update @denylog { meta skuid limit rate 5/minute } update @logged { meta skuid counter } log prefix "flock-deny " flags skuid comment "deny the cluster port of the flock's hosts (IPv4): count, log"`,
			`meta skuid @agents ip daddr @cluster_peers4 tcp dport 6222 reject with tcp reset comment "deny the cluster port of the flock's hosts (IPv4): reset"`,
			`meta skuid @agents ip6 daddr @cluster_peers6 tcp dport 6222 counter name "denied" update @refused { meta skuid counter } update @denylog { meta skuid limit rate 5/minute } update @logged { meta skuid counter } log prefix "flock-deny " flags skuid comment "deny the cluster port of the flock's hosts (IPv6): count, log"`,
			`meta skuid @agents ip6 daddr @cluster_peers6 tcp dport 6222 reject with tcp reset comment "deny the cluster port of the flock's hosts (IPv6): reset"`,
			`meta skuid @agents tcp dport 6222 fib daddr type @hosttypes counter name "denied" update @refused { meta skuid counter } update @denylog { meta skuid limit rate 5/minute } update @logged { meta skuid counter } log prefix "flock-deny " flags skuid comment "deny the cluster port of this host: count, log"`,
			`meta skuid @agents tcp dport 6222 fib daddr type @hosttypes reject with tcp reset comment "deny the cluster port of this host: reset"`,
		}
		want := strings.Join(append(append(a[:1:1], refusals...), a[1:]...), "\n")
		want = strings.ReplaceAll(want, single.Hash(), got.Hash()) // the policy's hash differs
		if strings.Join(b, "\n") != want {
			t.Errorf("uid %d: rules\n%s\nwant\n%s", uid, strings.Join(b, "\n"), want)
		}
	}
}

func TestValidateCluster(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Cluster
		want string
	}{
		{"no port", Cluster{Peers: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}, "the cluster port is not set"},
		{"no peers", Cluster{Port: 6222}, "a cluster without hosts"},
		{"an unspecified peer", Cluster{Port: 6222, Peers: []netip.Addr{netip.IPv4Unspecified()}}, `cluster peer "0.0.0.0"`},
		{"a multicast peer", Cluster{Port: 6222, Peers: []netip.Addr{netip.MustParseAddr("ff02::1")}}, `cluster peer "ff02::1"`},
		{"a zero peer", Cluster{Port: 6222, Peers: []netip.Addr{{}}}, `cluster peer "invalid IP"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := reference()
			p.Cluster = &tc.c
			if err := p.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want an error saying %q", err, tc.want)
			}
			if err := NewFake().Ensure(context.Background(), p); err == nil {
				t.Errorf("Fake.Ensure accepted it")
			}
		})
	}
}

// TestKernelCluster: host a's table, in a namespace standing for host a,
// wired to one standing for host b (a peer, over IPv4 and IPv6) and one
// standing for a stranger. Only b reaches a's cluster port; the stranger's
// connections are dropped and counted; other ports are not ours to close;
// a's agents reach neither b's cluster port nor b at all, and an agent
// whose allowances cover b (0.0.0.0/0:*, ::/0:*, b's address by name)
// reaches b's other ports but no host's cluster port, refused and counted
// as its own. A second Ensure of the same policy leaves the table as it
// was, and drift is seen.
func TestKernelCluster(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	a, b, x := newNetNS(t), newNetNS(t), newNetNS(t)
	link(t, a, b, "10.99.1.1/24", "10.99.1.2/24", "fd99:1::1/64", "fd99:1::2/64")
	link(t, a, x, "10.99.2.1/24", "10.99.2.2/24", "fd99:2::1/64", "fd99:2::2/64")
	// The stranger may try a's listed address too, through a.
	mustRun(t, "ip", "-n", x.name, "route", "add", "default", "via", "10.99.2.1")
	mustRun(t, "ip", "-n", x.name, "-6", "route", "add", "default", "via", "fd99:2::1")

	p := ForFlock(&spec.Flock{
		UIDBase: uidBase,
		Bus:     spec.Bus{Host: "127.0.0.1", Port: 4222, ClusterPort: 6222},
		Hosts: []spec.Host{
			{Name: "a", Address: netip.MustParseAddr("10.99.1.1")},
			{Name: "b", Address: netip.MustParseAddr("10.99.1.2")},
			{Name: "b6", Address: netip.MustParseAddr("fd99:1::2")},
		},
		Agents: []spec.Agent{{ID: 1, Host: "a"}, {ID: 2, Host: "a", Egress: []spec.Egress{
			egress("0.0.0.0/0", 0, "tcp"), egress("::/0", 0, "tcp"),
			// Explicit, so neither the host guard of a wide allowance nor
			// the deny at the end would stop them: only the refusals do.
			egress("10.99.1.2/32", 6222, "tcp"), egress("10.99.1.1/32", 0, "tcp"), egress("127.0.0.1/32", 6222, "tcp"),
		}}},
	})
	fw := NewInNetNS(a.fd)
	if err := fw.Ensure(ctx, p); err != nil {
		t.Fatal(err)
	}
	a.serveTCP(t, "[::]:6222") // the bus's cluster port, both IP versions
	a.serveTCP(t, "[::]:8080") // anything else on host a
	b.serveTCP(t, "[::]:6222") // b's cluster port
	b.serveTCP(t, "[::]:8080") // anything else on host b
	a.serveTCP(t, "127.0.0.1:4222")

	t.Run("the flock's hosts reach the cluster port", func(t *testing.T) {
		b.expectBanner(t, "b", "10.99.1.1:6222")
		b.expectBanner(t, "b over IPv6", "[fd99:1::1]:6222")
		a.expectBanner(t, "a itself, from its listed address", "10.99.1.1:6222")
	})
	t.Run("anyone else is dropped, and counted", func(t *testing.T) {
		before, _, err := fw.ClusterDenied(ctx)
		if err != nil {
			t.Fatal(err)
		}
		x.expectDropped(t, "a stranger", "10.99.2.1:6222")
		x.expectDropped(t, "a stranger over IPv6", "[fd99:2::1]:6222")
		x.expectDropped(t, "a stranger to a's listed address", "10.99.1.1:6222")
		a.expectDropped(t, "a over loopback", "127.0.0.1:6222")
		poll(t, 2*time.Second, "cluster_denied counts the strangers' SYNs", func() (bool, string) {
			n, _, err := fw.ClusterDenied(ctx)
			return err == nil && n >= before+4, fmt.Sprintf("%d packets, %v", n, err)
		})
		if d, _, _ := fw.Denied(ctx); d != 0 {
			t.Errorf("the agents' denied counter counted %d", d)
		}
	})
	t.Run("other ports are not ours to close", func(t *testing.T) {
		x.expectBanner(t, "a stranger", "10.99.2.1:8080")
		b.expectBanner(t, "b", "10.99.1.1:8080")
	})
	t.Run("agents reach neither the other hosts nor the cluster port", func(t *testing.T) {
		a.expectOK(t, "agent 1", agent1, "dial", "tcp", "127.0.0.1:4222")
		a.expectOK(t, "root", 0, "dial", "tcp", "10.99.1.2:6222") // b's port is up: the refusals are the table's
		a.expectRefused(t, "agent 1", agent1, "dial", "tcp", "10.99.1.2:6222")
		a.expectRefused(t, "agent 1", agent1, "dial", "tcp6", "[fd99:1::2]:6222")
		a.expectRefused(t, "agent 1", agent1, "dial", "tcp", "10.99.1.1:6222")
		a.expectRefused(t, "agent 1", agent1, "dial", "tcp", "127.0.0.1:6222")
	})
	t.Run("no allowance opens a cluster port to an agent", func(t *testing.T) {
		before, err := fw.Refused(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Its allowances are real: b's other ports, a's own by its address.
		a.expectOK(t, "agent 2", agent2, "dial", "tcp", "10.99.1.2:8080")
		a.expectOK(t, "agent 2", agent2, "dial", "tcp6", "[fd99:1::2]:8080")
		a.expectOK(t, "agent 2", agent2, "dial", "tcp", "10.99.1.1:8080")
		for _, to := range []struct{ network, addr string }{
			{"tcp", "10.99.1.2:6222"},    // b: 0.0.0.0/0:* and by name
			{"tcp6", "[fd99:1::2]:6222"}, // b over IPv6: ::/0:*
			{"tcp", "10.99.1.1:6222"},    // a's listed address, by name
			{"tcp", "127.0.0.1:6222"},    // a over loopback, by name
		} {
			a.expectRefused(t, "agent 2", agent2, "dial", to.network, to.addr)
		}
		// From a's listed address (bound by the agent) to one of a's
		// unlisted ones: the input chain would take it for a peer's, so
		// the output rule of this host's addresses (fib) must refuse it.
		a.expectRefused(t, "agent 2 from a's listed address", agent2, "dialfrom", "tcp", "10.99.1.1,127.0.0.1:6222")
		// Counted (and logged) as agent 2's own refusals, as status and
		// the events show them; each refused connect is one SYN.
		poll(t, 2*time.Second, "agent 2's refusals counted", func() (bool, string) {
			now, err := fw.Refused(ctx)
			r, was := now[agent2], before[agent2]
			return err == nil && r.Refused == was.Refused+5 && r.Logged == was.Logged+5, fmt.Sprintf("%+v (before %+v), %v", r, was, err)
		})
	})
	t.Run("a second Ensure changes nothing; drift is seen and repaired", func(t *testing.T) {
		matches := func(want bool, when string) {
			t.Helper()
			if ok, err := fw.Matches(ctx, p); ok != want || err != nil {
				cur, _, _ := fw.Current(ctx)
				r, _ := Render(p)
				t.Errorf("%s: Matches = %v, %v; want %v\n%s", when, ok, err, want, golden.LineDiff(r, cur))
			}
		}
		matches(true, "after the traffic")
		if err := fw.Ensure(ctx, p); err != nil {
			t.Fatal(err)
		}
		listed := a.nft(t, "list", "table", "inet", "flock")
		if err := fw.Ensure(ctx, p); err != nil {
			t.Fatal(err)
		}
		if again := a.nft(t, "list", "table", "inet", "flock"); again != listed {
			t.Errorf("nft list differs after a second Ensure:\n%s", golden.LineDiff(listed, again))
		}
		matches(true, "second Ensure")
		for _, drift := range [][]string{
			{"delete", "element", "inet", "flock", ClusterPeers4Set, "{ 10.99.1.2 }"},
			{"add", "element", "inet", "flock", ClusterPeers4Set, "{ 10.99.2.2 }"},
			{"flush", "chain", "inet", "flock", InputChain},
			{"delete", "chain", "inet", "flock", InputChain},
		} {
			a.nft(t, drift...)
			matches(false, "after nft "+strings.Join(drift, " "))
			if err := fw.Ensure(ctx, p); err != nil {
				t.Fatal(err)
			}
			matches(true, "Ensure after nft "+strings.Join(drift, " "))
		}
		// The single-host policy of the same agents has no input chain:
		// Matches tells them apart both ways.
		single := p
		single.Cluster = nil
		if ok, _ := fw.Matches(ctx, single); ok {
			t.Errorf("Matches(single-host policy) true on the multi-host table")
		}
		if err := fw.Ensure(ctx, single); err != nil {
			t.Fatal(err)
		}
		if out := a.nft(t, "list", "table", "inet", "flock"); strings.Contains(out, "chain input") || strings.Contains(out, "cluster") {
			t.Errorf("the single-host table kept the cluster's parts:\n%s", out)
		}
		x.expectBanner(t, "a stranger, the cluster closed no more", "10.99.2.1:6222")
	})
}

// link wires two namespaces with a veth pair, addresses on both ends.
func link(t *testing.T, a, b *netNS, a4, b4, a6, b6 string) {
	t.Helper()
	la, lb := "to-"+b.name[len(b.name)-6:], "to-"+a.name[len(a.name)-6:]
	mustRun(t, "ip", "-n", a.name, "link", "add", la, "type", "veth", "peer", "name", lb, "netns", b.name)
	for _, e := range []struct {
		ns     *netNS
		dev    string
		v4, v6 string
	}{{a, la, a4, a6}, {b, lb, b4, b6}} {
		mustRun(t, "ip", "-n", e.ns.name, "addr", "add", e.v4, "dev", e.dev)
		mustRun(t, "ip", "-n", e.ns.name, "addr", "add", e.v6, "dev", e.dev, "nodad")
		mustRun(t, "ip", "-n", e.ns.name, "link", "set", e.dev, "up")
	}
}

// dialAsRoot connects from inside ns and reads the listener's banner.
func (ns *netNS) dialAsRoot(t *testing.T, addr string, timeout time.Duration) error {
	t.Helper()
	var err error
	ns.do(t, func() {
		var c net.Conn
		c, err = net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(timeout))
		var line string
		if line, err = bufio.NewReader(c).ReadString('\n'); err == nil && line != "hello\n" {
			err = fmt.Errorf("unexpected banner %q", line)
		}
	})
	return err
}

func (ns *netNS) expectBanner(t *testing.T, who, addr string) {
	t.Helper()
	// A link just set up may still be settling (IPv6 neighbour discovery):
	// retry briefly rather than sleep.
	poll(t, 5*time.Second, who+" reaches "+addr, func() (bool, string) {
		err := ns.dialAsRoot(t, addr, time.Second)
		return err == nil, fmt.Sprint(err)
	})
}

// expectDropped: a dropped SYN is no answer at all, so the dial times out
// (a reset would fail it at once).
func (ns *netNS) expectDropped(t *testing.T, who, addr string) {
	t.Helper()
	err := ns.dialAsRoot(t, addr, 700*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("%s to %s: %v, want a timeout (dropped)", who, addr, err)
	}
}
