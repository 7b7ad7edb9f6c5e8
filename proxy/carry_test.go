package proxy

// Tier: unit: a tunnel's copies between two loopback sockets.

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pair is the two ends of a new loopback TCP connection.
func pair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	a.SetDeadline(time.Now().Add(10 * time.Second))
	b.SetDeadline(time.Now().Add(10 * time.Second))
	return a, b
}

// pipes counts this process's open pipes.
func pipes(t *testing.T) int {
	t.Helper()
	fds, err := filepath.Glob("/proc/self/fd/*")
	if err != nil || len(fds) == 0 {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && strings.HasPrefix(l, "pipe:") {
			n++
		}
	}
	return n
}

// A tunnel carries the client's bytes in the order sent when some wait in
// the proxy's request reader, some in dispatch's (beside the gateway) and
// the rest in the socket, and the upstream's whole; each way's count is
// right; and it holds no pipe while it carries (io.Copy's splice would
// hold one each way: four files more than spec.FilesPerTunnel counts).
func TestCarry(t *testing.T) {
	// The agent's end and the proxy's; the proxy's upstream end and the
	// upstream's.
	agent, client := pair(t)
	up, server := pair(t)
	sent := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
	back := bytes.Repeat([]byte("fedcba9876543210"), 1<<20)
	go func() {
		agent.Write(sent)
		agent.(*net.TCPConn).CloseWrite()
	}()
	// dispatch's reader holds 4096 bytes, the proxy's request reader
	// the first 1000 of them.
	dr := bufio.NewReaderSize(client, 4096)
	if _, err := dr.Peek(4096); err != nil {
		t.Fatal(err)
	}
	pc := &peeked{Conn: client, r: dr}
	br := bufio.NewReaderSize(pc, 1000)
	if _, err := br.Peek(1000); err != nil {
		t.Fatal(err)
	}
	if br.Buffered() != 1000 || dr.Buffered() != 3096 {
		t.Fatalf("buffered %d and %d, want 1000 and 3096", br.Buffered(), dr.Buffered())
	}
	before := pipes(t)
	during := make(chan int, 1)
	got := make(chan []byte, 1)
	go func() {
		var b bytes.Buffer
		io.CopyN(&b, server, 1<<20)
		during <- pipes(t)
		io.Copy(&b, server)
		got <- b.Bytes()
		server.Write(back)
		server.(*net.TCPConn).CloseWrite()
	}()
	down := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(agent)
		down <- b
	}()
	nUp, nDown, idled := carry(pc, br, up, 7, -1)
	if b := <-got; !bytes.Equal(b, sent) {
		t.Errorf("upstream got %d bytes, not the %d sent in order", len(b), len(sent))
	}
	if b := <-down; !bytes.Equal(b, back) {
		t.Errorf("the agent got %d bytes, not the %d sent back in order", len(b), len(back))
	}
	if nUp != 7+int64(len(sent)) || nDown != int64(len(back)) || idled {
		t.Errorf("counted %d up, %d down, idle %v; want %d, %d", nUp, nDown, idled, 7+len(sent), len(back))
	}
	if n := <-during - before; n > 0 {
		t.Errorf("%d pipes more while the tunnel carries", n)
	}
}

// The idle watch asks the kernel about the client's socket itself, not
// dispatch's wrapper, which hides it from TCP_INFO.
func TestSocketUnderDispatch(t *testing.T) {
	_, client := pair(t)
	pc := &peeked{Conn: client, r: bufio.NewReader(client)}
	if _, ok := socket(pc).(*net.TCPConn); !ok {
		t.Errorf("socket(peeked) is %T", socket(pc))
	}
	if _, ok := quiet(socket(pc)); !ok {
		t.Error("the kernel cannot be asked how long the socket under dispatch's reader is quiet")
	}
	if _, ok := quiet(pc); ok {
		t.Error("quiet of the wrapper itself answered; the test no longer shows why socket is needed")
	}
}
