package proxy

import (
	"encoding/binary"
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
type SockDiag struct{}

// sockDiagByFamily is SOCK_DIAG_BY_FAMILY (linux/sock_diag.h).
const sockDiagByFamily = 20

// UID returns the uid owning the TCP socket whose local end is local and
// whose peer is remote (the client's view: local is the client).
func (SockDiag) UID(local, remote netip.AddrPort) (uint32, error) {
	c, err := netlink.Dial(unix.NETLINK_SOCK_DIAG, nil)
	if err != nil {
		return 0, fmt.Errorf("sock_diag: dial netlink: %w", err)
	}
	defer c.Close()
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: sockDiagByFamily, Flags: netlink.Request},
		Data:   diagRequest(local, remote),
	})
	if err != nil {
		return 0, fmt.Errorf("sock_diag: socket %s -> %s: %w", local, remote, err)
	}
	for _, m := range msgs {
		if uid, ok := diagUID(m.Data); ok {
			return uid, nil
		}
	}
	return 0, fmt.Errorf("sock_diag: socket %s -> %s: no answer with a uid", local, remote)
}

// diagRequest is struct inet_diag_req_v2 for one TCP socket.
func diagRequest(local, remote netip.AddrPort) []byte {
	b := make([]byte, 56)
	fam := byte(unix.AF_INET)
	if local.Addr().Is6() && !local.Addr().Is4In6() {
		fam = unix.AF_INET6
	}
	b[0] = fam
	b[1] = unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(b[4:], 0xffffffff) // all states
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

// diagUID reads idiag_uid from struct inet_diag_msg (4 bytes of family,
// state, timer, retrans; 48 of sockid; expires, rqueue, wqueue; uid).
func diagUID(b []byte) (uint32, bool) {
	if len(b) < 72 {
		return 0, false
	}
	return binary.NativeEndian.Uint32(b[64:68]), true
}
