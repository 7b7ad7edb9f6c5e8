package audit

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/flockrun/flock/audit/probe"
)

// NewColluder names the channels of a colluder tagged tag (unique to one
// audit), with SysV keys from key; Open's answers fill in the ports.
func NewColluder(tag string, key int) Colluder {
	return Colluder{
		Abstract: "@" + tag, UnixTmp: filepath.Join("/tmp", tag+".sock"),
		MsgKey: 0x464c0000 | key&0xffff, ShmKey: 0x464d0000 | key&0xffff, MQName: "/" + tag,
		Files: []string{filepath.Join("/tmp", tag), filepath.Join("/dev/shm", tag), filepath.Join("/var/tmp", tag)},
	}
}

// PeerColluder is what agent peer opens as the colluder of root's c: the
// same channels under names of its own, so a probe that reaches one
// reached the peer's and not root's.
func PeerColluder(c Colluder, peer int) Colluder {
	tag := strings.TrimPrefix(c.Abstract, "@") + "-peer-" + strconv.Itoa(peer)
	p := NewColluder(tag, 0)
	// Keys of their own too: 0x4650xxxx, 0x4651xxxx, by the peer's id.
	p.MsgKey, p.ShmKey = 0x46500000|peer&0xffff, 0x46510000|peer&0xffff
	return p
}

// Opens are the requests that open c's channels, root's or a peer's
// alike; the ports are the kernel's choice (Opened reads them).
func (c Colluder) Opens() []probe.Request {
	open := []probe.Request{
		{Op: "listen-tcp", Addr: ":0"}, {Op: "listen-udp", Addr: "127.0.0.1:0"},
		{Op: "listen-unix", Addr: c.Abstract}, {Op: "listen-unix", Addr: c.UnixTmp},
		{Op: "msg-create", Key: c.MsgKey}, {Op: "shm-create", Key: c.ShmKey}, {Op: "mq-create", Name: c.MQName},
	}
	for _, p := range c.Files {
		open = append(open, probe.Request{Op: "write-file", Path: p, Data: "flock audit colluder\n", Mode: "0644"})
	}
	return open
}

// Opened is c with the ports its Opens' answers rs bound, and what did
// not open, each with what it answered. A channel not opened is zero in
// the result: a peer's sandbox may lack it (gVisor has no POSIX message
// queues), and a colluder cannot offer what it cannot open.
func (c Colluder) Opened(rs []probe.Result) (Colluder, []string, error) {
	open := c.Opens()
	if len(rs) != len(open) {
		return c, nil, fmt.Errorf("colluder: %d answers for %d channels", len(rs), len(open))
	}
	c.Files = append([]string(nil), c.Files...)
	var failed []string
	for i, r := range rs {
		if !r.OK {
			what := open[i].Addr + open[i].Path + open[i].Name
			if open[i].Key != 0 {
				what = fmt.Sprintf("%#x", open[i].Key)
			}
			failed = append(failed, fmt.Sprintf("%s %s: %s", open[i].Op, what, r.Err))
		}
		switch i {
		case 0:
			c.TCPPort = portOf(r)
		case 1:
			c.UDPPort = portOf(r)
		case 2:
			c.Abstract = ifOK(r, c.Abstract)
		case 3:
			c.UnixTmp = ifOK(r, c.UnixTmp)
		case 4:
			c.MsgKey = map[bool]int{true: c.MsgKey}[r.OK]
		case 5:
			c.ShmKey = map[bool]int{true: c.ShmKey}[r.OK]
		case 6:
			c.MQName = ifOK(r, c.MQName)
		default:
			c.Files[i-7] = ifOK(r, c.Files[i-7])
		}
	}
	return c, failed, nil
}

func ifOK(r probe.Result, s string) string {
	if r.OK {
		return s
	}
	return ""
}

func portOf(r probe.Result) int {
	if !r.OK {
		return 0
	}
	addr := r.Detail
	n, _ := strconv.Atoi(addr[strings.LastIndex(addr, ":")+1:])
	return n
}
