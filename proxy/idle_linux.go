package proxy

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// quiet is how long the TCP connection c has carried no data either way,
// as the kernel counts it (TCP_INFO's last data sent and received).
func quiet(c net.Conn) (time.Duration, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var info *unix.TCPInfo
	if err := raw.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || info == nil {
		return 0, false
	}
	return time.Duration(min(info.Last_data_sent, info.Last_data_recv)) * time.Millisecond, true
}
