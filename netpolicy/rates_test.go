package netpolicy

// Tier: root (netns). The per-agent rates to flock's services, in a real
// kernel: each holds the agent over it and nobody else.

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flockrun/flock/spec"
)

// ratesPolicy: agents 1 and 2 at the default send and connect rates,
// both reaching the proxy.
func ratesPolicy() Policy {
	named := []spec.Egress{{Name: "api.example.com", Port: 443, Proto: "tcp"}}
	return ForFlock(&spec.Flock{
		UIDBase: uidBase,
		Bus:     spec.Bus{Host: "127.0.0.1", Port: 4222, SendRate: spec.DefaultSendRate, ConnectRate: spec.DefaultConnectRate},
		Agents:  []spec.Agent{{ID: 1, Egress: named}, {ID: 2, Egress: named}},
	})
}

// dialAs opens a tcp connection to addr in the namespace from a socket
// owned by uid: the socket takes the creating thread's fsuid, which is
// set for the dial only (this test process stays root).
func (ns *netNS) dialAs(t *testing.T, uid int, addr string) (c net.Conn, err error) {
	t.Helper()
	ns.do(t, func() {
		if err = unix.Setfsuid(uid); err != nil {
			return
		}
		c, err = net.DialTimeout("tcp", addr, 3*time.Second)
		if e := unix.Setfsuid(0); e != nil && err == nil {
			err = e
		}
	})
	return c, err
}

// sink listens as root on addr in the namespace and counts what every
// connection sends.
func (ns *netNS) sink(t *testing.T, addr string) *atomic.Int64 {
	t.Helper()
	l := ns.listenTCP(t, addr)
	var got atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1<<20)
				for {
					n, err := c.Read(buf)
					got.Add(int64(n))
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return &got
}

// sendFor writes to c as fast as it can for d and says how much the
// kernel took (what the bus could have read is at most that).
func sendFor(c net.Conn, d time.Duration) int64 {
	buf := make([]byte, 1<<20)
	var sent int64
	_ = c.SetWriteDeadline(time.Now().Add(d))
	for {
		n, err := c.Write(buf)
		sent += int64(n)
		if err != nil {
			return sent
		}
	}
}

func refusedOf(t *testing.T, fw *NFT, uid uint32) uint64 {
	t.Helper()
	r, err := fw.Refused(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r[uid].Refused
}

func TestKernelSendRate(t *testing.T) {
	requireRoot(t)
	ns := newNetNS(t)
	fw := NewInNetNS(ns.fd)
	bus := ns.sink(t, "127.0.0.1:4222")
	if err := fw.Ensure(context.Background(), ratesPolicy()); err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20

	// A real client's burst: three of the largest messages at once, all
	// taken at loopback speed, nothing held back.
	c2, err := ns.dialAs(t, agent2, "127.0.0.1:4222")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	start := time.Now()
	for range 3 {
		if _, err := c2.Write(make([]byte, spec.MaxMessage)); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, 5*time.Second, "agent 2's burst at the bus", func() (bool, string) {
		return bus.Load() >= 3*spec.MaxMessage, time.Since(start).String()
	})
	if took, n := time.Since(start), refusedOf(t, fw, agent2); took > time.Second || n != 0 {
		t.Errorf("agent 2's burst of 3 largest messages: %v, %d packets held back; want < 1 s, none", took, n)
	}

	// Agent 1 floods: over 3 s the kernel takes its burst and 3 s at its
	// rate (and what the socket buffers hold), then holds it back; its
	// connection stays.
	c1, err := ns.dialAs(t, agent1, "127.0.0.1:4222")
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	const window = 3 * time.Second
	before := bus.Load()
	sendFor(c1, window)
	got := bus.Load() - before
	limit := int64(SendBurst) + int64(window/time.Second+2)*int64(spec.DefaultSendRate) // and what the buffers held
	if got > limit || got < int64(SendBurst) {
		t.Errorf("agent 1 flooding the bus for %v: the bus read %d MiB, want from %d to %d MiB", window, got/mib, SendBurst/mib, limit/mib)
	}
	if n := refusedOf(t, fw, agent1); n == 0 {
		t.Errorf("agent 1's flood: no packet counted as held back (set %s)", RefusedSet)
	} else {
		t.Logf("agent 1 flooding for %v: the bus read %d MiB, %d packets held back and counted", window, got/mib, n)
	}
	_ = c1.SetWriteDeadline(time.Time{})
	if _, err := c1.Write([]byte("PING\r\n")); err != nil {
		t.Errorf("agent 1's connection after the flood: %v, want it still open", err)
	}

	// Meanwhile agent 2 is not held: another burst goes through at once.
	before, start = bus.Load(), time.Now()
	if _, err := c2.Write(make([]byte, 4*mib)); err != nil {
		t.Fatal(err)
	}
	poll(t, 5*time.Second, "agent 2's message during agent 1's flood", func() (bool, string) {
		return bus.Load()-before >= 4*mib, time.Since(start).String()
	})
	if took := time.Since(start); took > time.Second {
		t.Errorf("agent 2's 4 MiB during agent 1's flood took %v, want < 1 s", took)
	}
	if n := refusedOf(t, fw, agent2); n != 0 {
		t.Errorf("agent 2: %d packets held back, want none", n)
	}

	// A uid that is no agent's is not limited at all.
	c0, err := ns.dialAs(t, nobody, "127.0.0.1:4222")
	if err != nil {
		t.Fatal(err)
	}
	defer c0.Close()
	before = bus.Load()
	sendFor(c0, time.Second)
	if got := bus.Load() - before; got < limit {
		t.Errorf("uid %d (no agent): the bus read %d MiB in 1 s, want more than an agent's most in 3 s, %d", nobody, got/mib, limit/mib)
	}
}

func TestKernelConnectRate(t *testing.T) {
	requireRoot(t)
	ns := newNetNS(t)
	fw := NewInNetNS(ns.fd)
	p := ratesPolicy()
	ns.sink(t, "127.0.0.1:4222")
	ns.sink(t, p.Proxy.String())
	if err := fw.Ensure(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	burst := 2 * spec.DefaultConnectRate
	for _, addr := range []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:4222"), p.Proxy} {
		t.Run(addr.String(), func(t *testing.T) {
			// Agent 1 opens connections as fast as it can: its burst
			// (and what its rate adds meanwhile) is let through, the rest
			// refused at once with a reset, counted.
			before := refusedOf(t, fw, agent1)
			var ok, refused int
			start := time.Now()
			for range 3 * burst {
				c, err := ns.dialAs(t, agent1, addr.String())
				switch {
				case err == nil:
					ok++
					c.Close()
				case errors.Is(err, unix.ECONNREFUSED):
					refused++
				default:
					t.Fatalf("agent 1's connection: %v, want success or ECONNREFUSED", err)
				}
			}
			took := time.Since(start)
			if most := burst + int(took.Seconds()*spec.DefaultConnectRate) + 1; ok < burst/2 || ok > most || refused == 0 {
				t.Errorf("agent 1, %d connections in %v: %d opened, %d refused; want %d to %d opened, the rest refused", 3*burst, took, ok, refused, burst/2, most)
			}
			if took > 3*time.Second {
				t.Errorf("agent 1's refusals took %v, want each at once", took)
			}
			if n := refusedOf(t, fw, agent1) - before; n < uint64(refused) {
				t.Errorf("agent 1: %d refused connections, %d counted", refused, n)
			}
			// Agent 2, at the same moment, is not held by agent 1's rate.
			for i := range spec.DefaultConnectRate {
				c, err := ns.dialAs(t, agent2, addr.String())
				if err != nil {
					t.Fatalf("agent 2's connection %d during agent 1's flood: %v", i+1, err)
				}
				_, _ = io.WriteString(c, "CONNECT")
				c.Close()
			}
			if n := refusedOf(t, fw, agent2); n != 0 {
				t.Errorf("agent 2: %d refusals counted, want none", n)
			}
		})
		time.Sleep(time.Duration(burst) * time.Second / time.Duration(spec.DefaultConnectRate)) // agent 1's bucket full again
	}
}
