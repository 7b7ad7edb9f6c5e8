package proxy

import (
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// The kernel names the uid of the client's socket, found from the server's
// side of the connection; another user's client is told apart.
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
