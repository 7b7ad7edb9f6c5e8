package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// held keeps the colluder's channels open for the life of the probe.
var (
	heldMu sync.Mutex
	held   []any
)

func hold(v any) {
	heldMu.Lock()
	held = append(held, v)
	heldMu.Unlock()
}

// message is what colluders put in every channel, so a hit is unmistakable.
const message = "flock-collude"

func dispatch(ctx context.Context, r Request) (string, error) {
	switch r.Op {
	case "pid":
		return strconv.Itoa(os.Getpid()), nil
	case "sleep": // Count milliseconds: a pause in a sequence of requests
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Duration(r.Count) * time.Millisecond):
			return "slept", nil
		}
	case "proxy-connect": // Addr: the CONNECT target; Name: the SNI
		return proxyConnect(ctx, r.Addr, r.Name)
	case "nats-connections", "nats-subscriptions", "nats-oversize", "nats-slow", "desk-send", "proxy-flood", "proxy-handshakes":
		return shareOp(ctx, r)

	// The colluder's side: open a channel and keep it open.
	case "listen-tcp":
		l, err := net.Listen("tcp", r.Addr)
		if err != nil {
			return "", err
		}
		hold(l)
		go EchoTCP(l, message+":")
		return l.Addr().String(), nil
	case "listen-udp":
		pc, err := net.ListenPacket("udp", r.Addr)
		if err != nil {
			return "", err
		}
		hold(pc)
		go EchoUDP(pc, message+":")
		return pc.LocalAddr().String(), nil
	case "listen-unix": // Go's "@name" is an abstract socket
		if !strings.HasPrefix(r.Addr, "@") {
			os.Remove(r.Addr) // a stale socket from an earlier run
		}
		l, err := net.Listen("unix", r.Addr)
		if err != nil {
			return "", err
		}
		hold(l)
		go EchoTCP(l, message+":")
		if !strings.HasPrefix(r.Addr, "@") {
			// Open the door as wide as a colluder can.
			if err := os.Chmod(r.Addr, 0o777); err != nil {
				return "", err
			}
		}
		return r.Addr, nil
	case "msg-create":
		return msgCreate(r.Key)
	case "shm-create":
		return shmCreate(r.Key)
	case "mq-create":
		return mqCreate(r.Name)
	case "write-file":
		return writeFile(r.Path, r.Data, r.Mode)
	case "chmod":
		m, err := parseMode(r.Mode)
		if err != nil {
			return "", err
		}
		return "", os.Chmod(r.Path, m)

	// The attacker's side: try a channel; success is a hole.
	case "connect-tcp", "connect-unix":
		network := map[string]string{"connect-tcp": "tcp", "connect-unix": "unix"}[r.Op]
		var d net.Dialer
		c, err := d.DialContext(ctx, network, r.Addr)
		if err != nil {
			return "", err
		}
		defer c.Close()
		// Connected is already a hole; the echo shows it carries data.
		echo, err := exchange(ctx, c)
		if err != nil {
			return "connected, no echo: " + err.Error(), nil
		}
		return "connected, echo " + strconv.Quote(echo), nil
	case "exchange-udp":
		var d net.Dialer
		c, err := d.DialContext(ctx, "udp", r.Addr)
		if err != nil {
			return "", err
		}
		defer c.Close()
		// A datagram sent proves nothing; only an answer does.
		echo, err := exchange(ctx, c)
		if err != nil {
			return "", err
		}
		return "echo " + strconv.Quote(echo), nil
	case "msg-open":
		return msgOpen(r.Key)
	case "shm-open":
		return shmOpen(r.Key)
	case "mq-open":
		return mqOpen(r.Name)
	case "read-secret":
		return readSecret(r.Path)
	case "secret-in-env": // Name: the salt, Data: the hash, Key: the length
		return secretInEnv(r.Name, r.Data, r.Key, r.Env)
	case "secret-elsewhere": // Addr: the CONNECT target; Send: the request on it
		return secretElsewhere(ctx, r)
	case "model-call": // Addr: the base URL, Path: the models' path, Key: a uid to call as
		return modelCall(ctx, r.Addr, r.Path, r.Key)
	case "read-file":
		b, err := os.ReadFile(r.Path)
		if err != nil {
			return "", err
		}
		return clip(string(b)), nil
	case "list-dir":
		es, err := os.ReadDir(r.Path)
		if err != nil {
			return "", err
		}
		names := make([]string, len(es))
		for i, e := range es {
			names[i] = e.Name()
		}
		return strings.Join(names, " "), nil
	case "stat":
		fi, err := os.Stat(r.Path)
		if err != nil {
			return "", err
		}
		return fi.Mode().String(), nil
	case "find-pid":
		return findPID(r.PID)
	case "kill":
		return "", unix.Kill(r.PID, unix.Signal(r.Sig))
	case "netlink-route":
		return netlinkRoute()
	case "setuid-bit":
		return setuidBit(r.Path)
	case "mmap-rwx":
		return mmapRWX()
	}
	if detail, err, ok := gatewayOp(ctx, r); ok {
		return detail, err
	}
	if detail, err, ok := hostile(r); ok {
		return detail, err
	}
	return busOp(ctx, r)
}

// EchoTCP answers each connection's first read with prefix and what it
// read, until l is closed: a colluder's channel, or a stand-in server.
func EchoTCP(l net.Listener, prefix string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			buf := make([]byte, 512)
			n, _ := c.Read(buf)
			c.Write(append([]byte(prefix), buf[:n]...))
		}()
	}
}

// EchoUDP answers each datagram with prefix and the datagram, until pc is
// closed.
func EchoUDP(pc net.PacketConn, prefix string) {
	buf := make([]byte, 512)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		pc.WriteTo(append([]byte(prefix), buf[:n]...), from)
	}
}

func exchange(ctx context.Context, c net.Conn) (string, error) {
	// Give up on the answer well before the attempt's own deadline: a
	// server that never answers "ping" (an HTTP port) must read as
	// "connected, no echo", not race run's timeout into a failure.
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl.Add(-min(Timeout, time.Until(dl)) / 4))
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		return "", err
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
		return "", err
	}
	return string(buf[:n]), nil
}

func writeFile(path, data, mode string) (string, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(data); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if mode != "" {
		m, err := parseMode(mode)
		if err != nil {
			return "", err
		}
		return "", os.Chmod(path, m)
	}
	return "", nil
}

func parseMode(s string) (os.FileMode, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return 0, fmt.Errorf("mode %q: %w", s, err)
	}
	return os.FileMode(m), nil
}

// findPID looks for pid the way an attacker would: by listing /proc.
func findPID(pid int) (string, error) {
	es, err := os.ReadDir("/proc")
	if err != nil {
		return "", err
	}
	visible := 0
	for _, e := range es {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		visible++
		if n == pid {
			return fmt.Sprintf("pid %d listed among %d", pid, visible), nil
		}
	}
	return "", fmt.Errorf("pid %d not listed in /proc (%d pids visible): %w", pid, visible, unix.ESRCH)
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// SysV message queue: the colluder creates it world-writable and leaves a
// message; the attacker looks the key up and takes the message.

type msgbuf struct {
	mtype int64
	mtext [64]byte
}

func msgCreate(key int) (string, error) {
	id, _, errno := unix.Syscall(unix.SYS_MSGGET, uintptr(key), unix.IPC_CREAT|0o666, 0)
	if errno != 0 {
		return "", fmt.Errorf("msgget(IPC_CREAT): %w", errno)
	}
	m := msgbuf{mtype: 1}
	copy(m.mtext[:], message)
	if _, _, errno := unix.Syscall6(unix.SYS_MSGSND, id, uintptr(unsafe.Pointer(&m)), uintptr(len(message)), unix.IPC_NOWAIT, 0, 0); errno != 0 {
		return "", fmt.Errorf("msgsnd: %w", errno)
	}
	return fmt.Sprintf("msqid %d", id), nil
}

func msgOpen(key int) (string, error) {
	id, _, errno := unix.Syscall(unix.SYS_MSGGET, uintptr(key), 0, 0)
	if errno != 0 {
		return "", fmt.Errorf("msgget: %w", errno)
	}
	var m msgbuf
	n, _, errno := unix.Syscall6(unix.SYS_MSGRCV, id, uintptr(unsafe.Pointer(&m)), uintptr(len(m.mtext)), 0, unix.IPC_NOWAIT, 0)
	if errno != 0 {
		return fmt.Sprintf("msqid %d found, msgrcv: %v", id, errno), nil
	}
	return fmt.Sprintf("msqid %d found, read %q", id, m.mtext[:n]), nil
}

// SysV shared memory, same game.

func shmCreate(key int) (string, error) {
	id, err := unix.SysvShmGet(key, 4096, unix.IPC_CREAT|0o666)
	if err != nil {
		return "", fmt.Errorf("shmget(IPC_CREAT): %w", err)
	}
	b, err := unix.SysvShmAttach(id, 0, 0)
	if err != nil {
		return "", fmt.Errorf("shmat: %w", err)
	}
	copy(b, message)
	hold(b)
	return fmt.Sprintf("shmid %d", id), nil
}

func shmOpen(key int) (string, error) {
	id, err := unix.SysvShmGet(key, 0, 0)
	if err != nil {
		return "", fmt.Errorf("shmget: %w", err)
	}
	b, err := unix.SysvShmAttach(id, 0, unix.SHM_RDONLY)
	if err != nil {
		return fmt.Sprintf("shmid %d found, shmat: %v", id, err), nil
	}
	defer unix.SysvShmDetach(b)
	return fmt.Sprintf("shmid %d found, read %q", id, strings.TrimRight(string(b[:32]), "\x00")), nil
}

// POSIX message queues, through the raw syscalls (the kernel takes the
// name without glibc's leading slash).

func mqName(name string) (*byte, error) {
	return unix.BytePtrFromString(strings.TrimPrefix(name, "/"))
}

func mqCreate(name string) (string, error) {
	p, err := mqName(name)
	if err != nil {
		return "", err
	}
	fd, _, errno := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(p)), unix.O_RDWR|unix.O_CREAT|unix.O_NONBLOCK, 0o666, 0, 0, 0)
	if errno != 0 {
		return "", fmt.Errorf("mq_open(O_CREAT): %w", errno)
	}
	hold(fd)
	msg := []byte(message)
	if _, _, errno := unix.Syscall6(unix.SYS_MQ_TIMEDSEND, fd, uintptr(unsafe.Pointer(&msg[0])), uintptr(len(msg)), 0, 0, 0); errno != 0 {
		return "", fmt.Errorf("mq_timedsend: %w", errno)
	}
	return fmt.Sprintf("mqd %d", fd), nil
}

func mqOpen(name string) (string, error) {
	p, err := mqName(name)
	if err != nil {
		return "", err
	}
	fd, _, errno := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(p)), unix.O_RDONLY|unix.O_NONBLOCK, 0, 0, 0, 0)
	if errno != 0 {
		return "", fmt.Errorf("mq_open: %w", errno)
	}
	defer unix.Close(int(fd))
	buf := make([]byte, 1<<16) // at least the queue's msgsize
	n, _, errno := unix.Syscall6(unix.SYS_MQ_TIMEDRECEIVE, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 0)
	if errno != 0 {
		return fmt.Sprintf("mqd found, mq_timedreceive: %v", errno), nil
	}
	return fmt.Sprintf("mqd found, read %q", buf[:n]), nil
}
