package netpolicy

// The root tests need sockets owned by an agent uid inside the test's
// network namespace. They get them by re-running this test binary through
// `ip netns exec NS` with helperEnv set: TestMain then drops to the uid
// named in the environment (all threads: Go's setuid is process-wide) and
// does one probe, answering on stdout. Running the binary as root and
// dropping privileges inside avoids needing a copy of it the agent uid may
// execute.

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const helperEnv = "FLOCK_NETPOLICY_HELPER" // dial | dialfrom | ping | send | flood | listen

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

// probeResult is what a helper reports about one attempt.
type probeResult struct {
	OK    bool   // the exchange completed (banner or echo received)
	Errno string // unix error name of the failure, if it was one
	Err   string
	MS    int64 // time from the first syscall to success or failure
	N     int   // flood: how many datagrams were refused
}

func runHelper(mode string) int {
	if err := dropTo(os.Getenv("NP_UID")); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	var r probeResult
	start := time.Now()
	var err error
	switch mode {
	case "dial":
		err = dial(os.Getenv("NP_NET"), os.Getenv("NP_ADDR"))
	case "dialfrom": // NP_ADDR is "SOURCE-IP,DESTINATION"
		from, to, _ := strings.Cut(os.Getenv("NP_ADDR"), ",")
		err = dialFrom(os.Getenv("NP_NET"), from, to)
	case "ping":
		err = ping(os.Getenv("NP_ADDR"))
	case "send":
		err = send(os.Getenv("NP_ADDR"))
	case "flood":
		r.N, err = flood(os.Getenv("NP_ADDR"), os.Getenv("NP_COUNT"))
	case "listen":
		return listen(os.Getenv("NP_ADDR"))
	default:
		err = fmt.Errorf("unknown helper mode %q", mode)
	}
	r.MS = time.Since(start).Milliseconds()
	r.OK = err == nil
	if err != nil {
		r.Err = err.Error()
		var errno syscall.Errno
		if errors.As(err, &errno) {
			r.Errno = unix.ErrnoName(errno)
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

func dropTo(uidText string) error {
	if uidText == "" {
		return nil
	}
	uid, err := strconv.Atoi(uidText)
	if err != nil {
		return err
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(uid, uid, uid); err != nil {
		return fmt.Errorf("setresgid %d: %w", uid, err)
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return fmt.Errorf("setresuid %d: %w", uid, err)
	}
	if os.Geteuid() != uid {
		return fmt.Errorf("still uid %d, want %d", os.Geteuid(), uid)
	}
	return nil
}

// dial opens network/addr and expects the other side to speak first
// (tcp: the listener's banner) or to echo (udp). A timeout is a failure of
// its own kind: a rejected packet must fail fast, not hang.
func dial(network, addr string) error { return dialFrom(network, "", addr) }

// dialFrom is dial from a source address the caller binds (none: the
// kernel's choice).
func dialFrom(network, from, addr string) error {
	d := net.Dialer{Timeout: 3 * time.Second}
	if from != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c, err := d.Dial(network, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if c.LocalAddr().Network() == "udp" {
		if _, err := c.Write([]byte("ping\n")); err != nil {
			return err
		}
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "hello\n" && line != "ping\n" {
		return fmt.Errorf("unexpected answer %q", line)
	}
	return nil
}

// ping sends one ICMP echo request through an unprivileged ping socket
// (allowed in the test namespace by net.ipv4.ping_group_range) and waits for
// the reply.
func ping(addr string) error {
	ip := net.ParseIP(addr).To4()
	if ip == nil {
		return fmt.Errorf("ping: %q is not an IPv4 address", addr)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP)
	if err != nil {
		return fmt.Errorf("ping socket: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval((2 * time.Second).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	req := make([]byte, 8+4) // type 8 (echo request), code 0; the kernel fills id and checksum
	req[0] = 8
	binary.BigEndian.PutUint16(req[6:], 1)
	copy(req[8:], "flok")
	sa := &unix.SockaddrInet4{}
	copy(sa.Addr[:], ip)
	if err := unix.Sendto(fd, req, 0, sa); err != nil {
		return fmt.Errorf("ping sendto: %w", err)
	}
	buf := make([]byte, 64)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return fmt.Errorf("ping recvfrom: %w", err)
	}
	if n < 8 || buf[0] != 0 {
		return fmt.Errorf("ping: not an echo reply: % x", buf[:n])
	}
	return nil
}

// send sends one UDP datagram to an IPv4 addr (multicast and broadcast
// included: the socket may broadcast) and expects no answer: success is
// the kernel taking it. An output hook that rejects it fails the sendto.
func send(addr string) error {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return fmt.Errorf("send: %q is not an IPv4 address and port", addr)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_UDP)
	if err != nil {
		return fmt.Errorf("udp socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_BROADCAST, 1); err != nil {
		return err
	}
	if err := unix.Sendto(fd, []byte("flok"), 0, &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}); err != nil {
		return fmt.Errorf("sendto: %w", err)
	}
	return nil
}

// flood sends count UDP datagrams to addr as fast as it can and says how
// many the output hook refused at sendto (EPERM).
func flood(addr, count string) (refused int, err error) {
	n, err := strconv.Atoi(count)
	if err != nil {
		return 0, fmt.Errorf("flood: count %q: %w", count, err)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() {
		return 0, fmt.Errorf("flood: %q is not an IPv4 address and port", addr)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_UDP)
	if err != nil {
		return 0, fmt.Errorf("udp socket: %w", err)
	}
	defer unix.Close(fd)
	to := &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}
	for i := range n {
		switch err := unix.Sendto(fd, []byte("flok"), 0, to); {
		case errors.Is(err, unix.EPERM):
			refused++
		case err != nil:
			return refused, fmt.Errorf("sendto %d of %d: %w", i+1, n, err)
		}
	}
	return refused, nil
}

// listen serves a banner on addr until stdin closes; "ready" on stdout says
// the socket is bound.
func listen(addr string) int {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper listen:", err)
		return 2
	}
	go serveBanner(l)
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the test closes our stdin
	return 0
}

// serveBanner answers every connection with a line and closes it, so a
// client that connected knows it was let through.
func serveBanner(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		_, _ = c.Write([]byte("hello\n"))
		_ = c.Close()
	}
}
