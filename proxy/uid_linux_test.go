package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Unit tier (root adds a client of another uid). The kernel names the
// uid of the client's socket, found from the server's side of the
// connection; another user's client is told apart.
func TestSockDiagUID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := <-accepted
	defer s.Close()
	uid, err := SockDiag{}.UID(addrPort(s.RemoteAddr()), addrPort(s.LocalAddr()))
	if err != nil {
		t.Fatal(err)
	}
	if uid != uint32(os.Getuid()) {
		t.Errorf("uid = %d, want %d", uid, os.Getuid())
	}
	// No such socket: an error, never uid 0.
	if uid, err := (SockDiag{}).UID(netip.MustParseAddrPort("127.0.0.1:1"), addrPort(s.LocalAddr())); err == nil {
		t.Errorf("a socket that does not exist has uid %d", uid)
	}

	if os.Getuid() != 0 {
		t.Skip("a client of another uid needs root")
	}
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	// A client socket created with fsuid 65534 (nobody): the kernel
	// records that uid as the socket's owner.
	fd := nobodySocket(t)
	sa := &unix.SockaddrInet4{Port: ln.Addr().(*net.TCPAddr).Port, Addr: [4]byte{127, 0, 0, 1}}
	if err := unix.Connect(fd, sa); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	s2 := <-accepted
	defer s2.Close()
	uid, err = SockDiag{}.UID(addrPort(s2.RemoteAddr()), addrPort(s2.LocalAddr()))
	if err != nil || uid != 65534 {
		t.Errorf("uid of nobody's client = %d, %v; want 65534", uid, err)
	}
}

func nobodySocket(t *testing.T) int {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	unix.Setfsuid(65534)
	defer unix.Setfsuid(0)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

// socketAs is a TCP socket of family fam whose owner the kernel records as
// uid: created with that fsuid when the test is root, else the test's own
// (uid is then ignored).
func socketAs(t *testing.T, fam int, uid int) int {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if os.Getuid() == 0 && uid != 0 {
		unix.Setfsuid(uid)
		defer unix.Setfsuid(0)
	}
	fd, err := unix.Socket(fam, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// otherUID is the uid a listener of "another agent" is made with: nobody
// when the test is root, else the test's own (the refusal is the same;
// only the wrong answer the old lookup gave would look less foreign).
func otherUID() uint32 {
	if os.Getuid() == 0 {
		return 65534
	}
	return uint32(os.Getuid())
}

// listenerAs opens a TCP listener of uid's on host:port ("127.0.0.1",
// "0.0.0.0", "::1", or "::" dual-stack) and returns its port.
func listenerAs(t *testing.T, uid uint32, host string, port uint16) uint16 {
	t.Helper()
	p, err := tryListenerAs(t, uid, host, port)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tryListenerAs is listenerAs that returns a bind's EADDRINUSE (wrapped)
// instead of failing: a port a test expected free may have been taken by
// any other process's connection in the meantime.
func tryListenerAs(t *testing.T, uid uint32, host string, port uint16) (uint16, error) {
	t.Helper()
	a := netip.MustParseAddr(host)
	fam := unix.AF_INET6
	var sa unix.Sockaddr = &unix.SockaddrInet6{Port: int(port), Addr: a.As16()}
	if a.Is4() {
		fam = unix.AF_INET
		sa = &unix.SockaddrInet4{Port: int(port), Addr: a.As4()}
	}
	fd := socketAs(t, fam, int(uid))
	if fam == unix.AF_INET6 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Bind(fd, sa); err != nil {
		if err == unix.EADDRINUSE {
			return 0, fmt.Errorf("bind %s port %d: %w", host, port, err)
		}
		t.Fatalf("bind %s port %d: %v", host, port, err)
	}
	if err := unix.Listen(fd, 8); err != nil {
		t.Fatal(err)
	}
	got, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	switch s := got.(type) {
	case *unix.SockaddrInet4:
		return uint16(s.Port), nil
	case *unix.SockaddrInet6:
		return uint16(s.Port), nil
	}
	t.Fatalf("getsockname: %T", got)
	return 0, nil
}

// hasIPv6 is whether ::1 can be bound here.
func hasIPv6() bool {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// Unit tier (root only makes the listener another uid's). The kernel's
// exact lookup falls back to a listener bound to the asked local port
// when no established socket has the four addresses: asked about a
// client 127.0.0.1:P -> 127.0.0.1:1 that does not exist, it answers the
// listener on P. That listener is not the client: the lookup is refused,
// never the listener's uid.
func TestSockDiagRefusesAListener(t *testing.T) {
	for _, tc := range []struct {
		name, listen, client string
		v6                   bool
	}{
		{"v4 listener", "127.0.0.1", "127.0.0.1", false},
		{"wildcard v4 listener", "0.0.0.0", "127.0.0.1", false},
		{"dual-stack listener, v4 client", "::", "127.0.0.1", true},
		{"dual-stack listener, v4-mapped client", "::", "::ffff:127.0.0.1", true},
		{"v6 listener", "::1", "::1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.v6 && !hasIPv6() {
				t.Skip("no IPv6 on lo here")
			}
			p := listenerAs(t, otherUID(), tc.listen, 0)
			client := netip.MustParseAddr(tc.client)
			uid, err := SockDiag{}.UID(netip.AddrPortFrom(client, p), netip.AddrPortFrom(client, 1))
			if err == nil {
				t.Fatalf("a client that does not exist resolved to uid %d (the listener on port %d is %d's)", uid, p, otherUID())
			}
			if !errors.Is(err, ErrNoSocket) {
				t.Errorf("err = %v, want one wrapping ErrNoSocket", err)
			}
			t.Log(err)
		})
	}
}

// Unit tier (root only makes the listener another uid's). A real client
// connection is reset (linger 0, close) before the proxy asks who owns it:
// the lookup is refused, whether or not another uid's listener has since
// taken the client's port (the fallback the kernel's lookup makes).
func TestSockDiagRefusesAResetClient(t *testing.T) {
	for _, tc := range []struct {
		name, listen string // listen: "" for no listener on the client's port
		v6           bool
	}{
		{"no listener", "", false},
		{"v4 listener on the client's port", "127.0.0.1", false},
		{"wildcard listener on the client's port", "0.0.0.0", false},
		{"dual-stack listener on the client's port", "::", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.v6 && !hasIPv6() {
				t.Skip("no IPv6 on lo here")
			}
			// Between the reset and the bind below, any other process's
			// connection may take the freed port (the unit tier runs every
			// package at once): then the case is tried again on a new port.
			var client, server netip.AddrPort
			for attempt := 1; ; attempt++ {
				c, s := pair(t)
				client, server = addrPort(s.RemoteAddr()), addrPort(s.LocalAddr())
				// Known before the reset: the lookup names the client.
				if uid, err := (SockDiag{}).UID(client, server); err != nil || uid != uint32(os.Getuid()) {
					t.Fatalf("before the reset: uid %d, %v; want %d", uid, err, os.Getuid())
				}
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
				// The server's end sees the reset: the client's socket is gone.
				s.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := s.Read(make([]byte, 1)); !errors.Is(err, unix.ECONNRESET) {
					t.Fatalf("server read after the client's reset: %v, want ECONNRESET", err)
				}
				if tc.listen == "" {
					break
				}
				_, err := tryListenerAs(t, otherUID(), tc.listen, client.Port())
				if err == nil {
					break
				}
				if attempt == 5 {
					t.Fatalf("the reset client's port was taken again each of %d times: %v", attempt, err)
				}
				t.Logf("attempt %d: %v (another process took the port); again", attempt, err)
			}
			uid, err := SockDiag{}.UID(client, server)
			if err == nil {
				t.Fatalf("a reset client resolved to uid %d", uid)
			}
			if !errors.Is(err, ErrNoSocket) {
				t.Errorf("err = %v, want one wrapping ErrNoSocket", err)
			}
			t.Log(err)
		})
	}
}

// Unit tier. The client's established socket is found and its uid named
// whatever the families: an IPv4 client of a dual-stack listener (the
// server sees ::ffff:a.b.c.d), an AF_INET6 client socket talking IPv4 to
// ::ffff:127.0.0.1 (which the kernel reports as AF_INET6 with mapped
// addresses), and IPv6.
func TestSockDiagUIDFamilies(t *testing.T) {
	for _, tc := range []struct {
		name, listen string // "host:port" to net.Listen
		dialFam      int
		dial         string // the address the client connects to
		v6           bool
	}{
		{"v4 client, v4 listener", "127.0.0.1:0", unix.AF_INET, "127.0.0.1", false},
		{"v4 client, dual-stack listener", "[::]:0", unix.AF_INET, "127.0.0.1", true},
		{"v6 socket to ::ffff:127.0.0.1, v4 listener", "127.0.0.1:0", unix.AF_INET6, "::ffff:127.0.0.1", true},
		{"v6 socket to ::ffff:127.0.0.1, dual-stack listener", "[::]:0", unix.AF_INET6, "::ffff:127.0.0.1", true},
		{"v6 client, v6 listener", "[::1]:0", unix.AF_INET6, "::1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.v6 && !hasIPv6() {
				t.Skip("no IPv6 on lo here")
			}
			ln, err := net.Listen("tcp", tc.listen)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			port := ln.Addr().(*net.TCPAddr).Port
			fd := socketAs(t, tc.dialFam, int(otherUID()))
			a := netip.MustParseAddr(tc.dial)
			var sa unix.Sockaddr = &unix.SockaddrInet6{Port: port, Addr: a.As16()}
			if tc.dialFam == unix.AF_INET {
				sa = &unix.SockaddrInet4{Port: port, Addr: a.As4()}
			}
			if err := unix.Connect(fd, sa); err != nil {
				t.Fatal(err)
			}
			s, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			client, server := addrPort(s.RemoteAddr()), addrPort(s.LocalAddr())
			uid, err := SockDiag{}.UID(client, server)
			if err != nil || uid != otherUID() {
				t.Errorf("UID(%s, %s) = %d, %v; want %d", client, server, uid, err, otherUID())
			}
		})
	}
}

// Unit tier, no kernel: each answer is checked against what was asked.
// Only an established socket with the same addresses and ports counts,
// an AF_INET6 socket's v4-mapped addresses compared unmapped.
func TestDiagAnswer(t *testing.T) {
	v4c, v4s := netip.MustParseAddrPort("127.0.0.1:40000"), netip.MustParseAddrPort("127.0.0.1:3128")
	v6c, v6s := netip.MustParseAddrPort("[::1]:40000"), netip.MustParseAddrPort("[::1]:3128")
	mapped := func(a netip.AddrPort) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr().As16()), a.Port())
	}
	// msg is an inet_diag_msg of a socket local -> remote, uid 1001.
	msg := func(fam, state uint8, local, remote netip.AddrPort) []byte {
		b := make([]byte, 72)
		b[0], b[1] = fam, state
		binary.BigEndian.PutUint16(b[4:], local.Port())
		binary.BigEndian.PutUint16(b[6:], remote.Port())
		if fam == unix.AF_INET {
			l, r := local.Addr().As4(), remote.Addr().As4()
			copy(b[8:], l[:])
			copy(b[24:], r[:])
		} else {
			l, r := local.Addr().As16(), remote.Addr().As16()
			copy(b[8:], l[:])
			copy(b[24:], r[:])
		}
		binary.NativeEndian.PutUint32(b[64:], 1001)
		return b
	}
	for _, tc := range []struct {
		name          string
		answer        []byte
		local, remote netip.AddrPort // asked
		ok            bool
	}{
		{"v4 established", msg(unix.AF_INET, 1, v4c, v4s), v4c, v4s, true},
		{"v4 asked mapped", msg(unix.AF_INET, 1, v4c, v4s), mapped(v4c), mapped(v4s), true},
		{"v6 socket, mapped addresses", msg(unix.AF_INET6, 1, mapped(v4c), mapped(v4s)), v4c, v4s, true},
		{"v6 established", msg(unix.AF_INET6, 1, v6c, v6s), v6c, v6s, true},
		{"v6 asked with a zone", msg(unix.AF_INET6, 1, v6c, v6s), netip.AddrPortFrom(v6c.Addr().WithZone("lo"), v6c.Port()), v6s, true},
		{"listening", msg(unix.AF_INET, 10, netip.AddrPortFrom(v4c.Addr(), v4c.Port()), netip.MustParseAddrPort("0.0.0.0:0")), v4c, v4s, false},
		{"listening, right addresses", msg(unix.AF_INET, 10, v4c, v4s), v4c, v4s, false},
		{"time-wait", msg(unix.AF_INET, 6, v4c, v4s), v4c, v4s, false},
		{"fin-wait2", msg(unix.AF_INET, 5, v4c, v4s), v4c, v4s, false},
		{"other local port", msg(unix.AF_INET, 1, netip.AddrPortFrom(v4c.Addr(), 40001), v4s), v4c, v4s, false},
		{"other remote port", msg(unix.AF_INET, 1, v4c, netip.AddrPortFrom(v4s.Addr(), 3129)), v4c, v4s, false},
		{"other local address", msg(unix.AF_INET, 1, netip.MustParseAddrPort("127.0.0.2:40000"), v4s), v4c, v4s, false},
		{"other remote address", msg(unix.AF_INET, 1, v4c, netip.MustParseAddrPort("127.0.0.2:3128")), v4c, v4s, false},
		{"swapped ends", msg(unix.AF_INET, 1, v4s, v4c), v4c, v4s, false},
		{"v6 answer to a v4 question", msg(unix.AF_INET6, 1, netip.MustParseAddrPort("[::7f00:1]:40000"), netip.MustParseAddrPort("[::7f00:1]:3128")), v4c, v4s, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uid, err := diagAnswer(tc.answer, tc.local, tc.remote)
			if tc.ok && (err != nil || uid != 1001) {
				t.Errorf("= %d, %v; want 1001", uid, err)
			}
			if !tc.ok && (err == nil || !errors.Is(err, ErrNoSocket)) {
				t.Errorf("= %d, %v; want an error wrapping ErrNoSocket", uid, err)
			}
		})
	}
	for _, b := range [][]byte{nil, make([]byte, 71), append([]byte{99, 1}, make([]byte, 70)...)} {
		if uid, err := diagAnswer(b, v4c, v4s); err == nil {
			t.Errorf("answer of %d bytes, family %v: uid %d, no error", len(b), b[:min(len(b), 1)], uid)
		}
	}
}
