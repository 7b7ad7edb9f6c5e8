package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/flockrun/flock/counters"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/units"
)

// newCounters is the reader behind flock-counters.socket: systemd starts
// it for each connection with the connection as standard input
// (Accept=yes), CAP_NET_ADMIN and nothing else. Hidden: flock.service's
// /metrics asks it; an operator has flockctl status and events.
func newCounters() *cobra.Command {
	return &cobra.Command{
		Use:    "counters",
		Short:  "Answer one connection on flock-counters.socket with the firewall's per-agent counters",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCounters(cmd.Context(), os.Stdin)
		},
	}
}

// readTimeout bounds the netlink read: the bus gives up after its own
// timeout (counters.Client's), and a reader must not outlive it for long.
const readTimeout = 5 * time.Second

func runCounters(ctx context.Context, in *os.File) error {
	c, err := net.FileConn(in)
	if err != nil {
		return fmt.Errorf("flockctl counters answers the connection systemd hands it as standard input (%s): %w", units.CountersTemplate, err)
	}
	defer c.Close()
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("flockctl counters: standard input is a %s socket, want a Unix one (%s)", c.LocalAddr().Network(), units.CountersSocket)
	}
	peer, err := peerUID(uc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	_ = uc.SetWriteDeadline(time.Now().Add(readTimeout))
	err = counters.Serve(ctx, uc, peer, mayReadCounters, netpolicy.New())
	linger(uc)
	return err
}

// linger ends the answer (EOF to the peer) and reads what the peer sent
// until it closes, a little while at most: closing a Unix socket with
// unread data resets the peer's read of the answer. The bus sends
// nothing; an operator's `curl --http0.9 --unix-socket` sends a request.
func linger(c *net.UnixConn) {
	_ = c.CloseWrite()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<16))
}

// mayReadCounters: root, and flock.service's user. The socket's mode
// (0600, the bus's user's) already keeps everyone else out; this holds
// even where someone loosened it.
func mayReadCounters(uid uint32) bool {
	if uid == 0 {
		return true
	}
	u, err := user.Lookup(units.BusUser)
	if err != nil {
		return false
	}
	bus, err := strconv.ParseUint(u.Uid, 10, 32)
	return err == nil && uint32(bus) == uid
}

// peerUID is the uid of the process at the other end of c, as the kernel
// recorded it when it connected.
func peerUID(c *net.UnixConn) (uint32, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("reading the peer's credentials: %w", err)
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, fmt.Errorf("reading the peer's credentials: %w", err)
	}
	if cerr != nil {
		return 0, fmt.Errorf("reading the peer's credentials (SO_PEERCRED): %w", cerr)
	}
	if cred == nil {
		return 0, errors.New("reading the peer's credentials: none")
	}
	return cred.Uid, nil
}
