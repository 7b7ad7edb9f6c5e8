package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// SockDiag asks the kernel (NETLINK_SOCK_DIAG, inet_diag) which uid owns
// a TCP socket on this host, found by its 4-tuple. The proxy asks it about
// the client's end of each accepted connection: the answer is the kernel's
// record of who created that socket, which no byte the client sends can
// change.
//
// Only an established socket with exactly the four addresses asked about
// is the client. The kernel's exact lookup (inet_diag_find_one_icsk, by
// inet_lookup) falls back to a listening socket bound to the asked local
// port when no established socket has the four addresses (the client's
// was reset before the proxy asked): that listener may be another
// agent's, and its uid would charge one agent's connection to another's
// grant and limits. So each answer's state and addresses are checked.
type SockDiag struct{}

// ErrNoSocket is the kernel having no established TCP socket with the
// four addresses asked about: the client's socket is gone (reset or
// closed before the lookup) or never was, or the kernel answered some
// other socket (a listener on the port). Nobody owns the connection;
// callers refuse it.
var ErrNoSocket = errors.New("no established TCP socket with these addresses")

// sockDiagByFamily is SOCK_DIAG_BY_FAMILY (linux/sock_diag.h).
const sockDiagByFamily = 20

// tcpEstablished is TCP_ESTABLISHED (include/net/tcp_states.h).
const tcpEstablished = 1

// UID returns the uid owning the established TCP socket whose local end
// is local and whose peer is remote (the client's view: local is the
// client). Anything but that socket is an error wrapping ErrNoSocket.
func (SockDiag) UID(local, remote netip.AddrPort) (uint32, error) {
	if !local.IsValid() || !remote.IsValid() || local.Addr().Unmap().Is4() != remote.Addr().Unmap().Is4() {
		return 0, fmt.Errorf("sock_diag: socket %s -> %s: not a pair of TCP addresses of one family", local, remote)
	}
	c, err := netlink.Dial(unix.NETLINK_SOCK_DIAG, nil)
	if err != nil {
		return 0, fmt.Errorf("sock_diag: dial netlink: %w", err)
	}
	defer c.Close()
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: sockDiagByFamily, Flags: netlink.Request},
		Data:   diagRequest(local, remote),
	})
	if errors.Is(err, unix.ENOENT) {
		return 0, fmt.Errorf("sock_diag: socket %s -> %s: %w: the kernel found none", local, remote, ErrNoSocket)
	}
	if err != nil {
		return 0, fmt.Errorf("sock_diag: socket %s -> %s: %w", local, remote, err)
	}
	if len(msgs) == 0 {
		return 0, fmt.Errorf("sock_diag: socket %s -> %s: %w: the kernel answered nothing", local, remote, ErrNoSocket)
	}
	var uid uint32
	for i, m := range msgs {
		u, err := diagAnswer(m.Data, local, remote)
		if err != nil {
			return 0, fmt.Errorf("sock_diag: socket %s -> %s: %w", local, remote, err)
		}
		if i > 0 && u != uid {
			return 0, fmt.Errorf("sock_diag: socket %s -> %s: the kernel answered two sockets, of uids %d and %d", local, remote, uid, u)
		}
		uid = u
	}
	return uid, nil
}

// diagRequest is struct inet_diag_req_v2 for one established TCP socket.
// The state mask does not stop the exact lookup's fallback to a listener
// (the kernel does not apply it to one socket); diagAnswer does.
func diagRequest(local, remote netip.AddrPort) []byte {
	b := make([]byte, 56)
	fam := byte(unix.AF_INET)
	if local.Addr().Is6() && !local.Addr().Is4In6() {
		fam = unix.AF_INET6
	}
	b[0] = fam
	b[1] = unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(b[4:], 1<<tcpEstablished)
	putDiagID(b[8:], local, remote)
	return b
}

// putDiagID writes struct inet_diag_sockid: ports and addresses in
// network order, the cookie "none" (all ones).
func putDiagID(b []byte, local, remote netip.AddrPort) {
	binary.BigEndian.PutUint16(b[0:], local.Port())
	binary.BigEndian.PutUint16(b[2:], remote.Port())
	putAddr(b[4:20], local.Addr())
	putAddr(b[20:36], remote.Addr())
	binary.NativeEndian.PutUint32(b[40:], 0xffffffff)
	binary.NativeEndian.PutUint32(b[44:], 0xffffffff)
}

func putAddr(b []byte, a netip.Addr) {
	a = a.Unmap()
	if a.Is4() {
		v := a.As4()
		copy(b, v[:])
		return
	}
	v := a.As16()
	copy(b, v[:])
}

// diagMsg is the part of struct inet_diag_msg the proxy reads: 4 bytes of
// family, state, timer, retrans; 48 of inet_diag_sockid (sport, dport,
// src, dst in network order, an IPv4 address in the first 4 bytes of its
// 16; if; cookie); expires, rqueue, wqueue; uid; inode.
type diagMsg struct {
	family, state uint8
	local, remote netip.AddrPort // unmapped
	uid           uint32
}

func parseDiagMsg(b []byte) (diagMsg, error) {
	if len(b) < 72 {
		return diagMsg{}, fmt.Errorf("the kernel answered %d bytes, short of an inet_diag_msg", len(b))
	}
	m := diagMsg{family: b[0], state: b[1], uid: binary.NativeEndian.Uint32(b[64:68])}
	var src, dst netip.Addr
	switch m.family {
	case unix.AF_INET:
		src, dst = netip.AddrFrom4([4]byte(b[8:12])), netip.AddrFrom4([4]byte(b[24:28]))
	case unix.AF_INET6:
		// A socket of a dual-stack (not v6only) socket talking IPv4 is
		// AF_INET6 with addresses ::ffff:a.b.c.d.
		src, dst = netip.AddrFrom16([16]byte(b[8:24])).Unmap(), netip.AddrFrom16([16]byte(b[24:40])).Unmap()
	default:
		return diagMsg{}, fmt.Errorf("the kernel answered a socket of family %d", m.family)
	}
	m.local = netip.AddrPortFrom(src, binary.BigEndian.Uint16(b[4:6]))
	m.remote = netip.AddrPortFrom(dst, binary.BigEndian.Uint16(b[6:8]))
	return m, nil
}

// diagAnswer is the uid in one answer of the kernel's, if it is the
// socket asked about: established, with the same local and remote
// addresses and ports (compared unmapped, so of the same family).
func diagAnswer(b []byte, local, remote netip.AddrPort) (uint32, error) {
	m, err := parseDiagMsg(b)
	if err != nil {
		return 0, err
	}
	if m.state != tcpEstablished || m.local != unmapped(local) || m.remote != unmapped(remote) {
		return 0, fmt.Errorf("%w: the kernel answered a %s socket %s -> %s of uid %d", ErrNoSocket, tcpState(m.state), m.local, m.remote, m.uid)
	}
	return m.uid, nil
}

// unmapped is a as the kernel reports it: IPv4 as IPv4, no zone.
func unmapped(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap().WithZone(""), a.Port())
}

// tcpState names a TCP state (include/net/tcp_states.h).
func tcpState(s uint8) string {
	names := [...]string{1: "established", "syn-sent", "syn-recv", "fin-wait1", "fin-wait2", "time-wait", "close", "close-wait", "last-ack", "listening", "closing", "new-syn-recv", "bound-inactive"}
	if int(s) < len(names) && names[s] != "" {
		return names[s]
	}
	return fmt.Sprintf("state-%d", s)
}
