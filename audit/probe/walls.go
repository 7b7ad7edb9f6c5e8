package probe

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// The walls every level must keep (agent.Walls, and systemd's at level
// process): each op succeeds only where the wall is missing.

// netlinkRoute opens a NETLINK_ROUTE socket and asks for the host's
// addresses: a hole when it answers.
func netlinkRoute() (string, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return "", fmt.Errorf("socket(AF_NETLINK, NETLINK_ROUTE): %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return "", fmt.Errorf("bind netlink: %w", err)
	}
	return "netlink route socket open", nil
}

// setuidBit makes a file of its own and sets its setuid bit: a hole when
// the bit sticks.
func setuidBit(path string) (string, error) {
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o700); err != nil {
		return "", err
	}
	defer os.Remove(path)
	if err := unix.Chmod(path, 0o4755); err != nil {
		return "", fmt.Errorf("chmod u+s: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", err
	}
	if st.Mode&unix.S_ISUID == 0 {
		return "", fmt.Errorf("chmod u+s answered success but the bit did not stick (mode %o)", st.Mode)
	}
	return fmt.Sprintf("setuid bit set (mode %o)", st.Mode&0o7777), nil
}

// mmapRWX maps memory writable and executable at once.
func mmapRWX() (string, error) {
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return "", fmt.Errorf("mmap(PROT_WRITE|PROT_EXEC): %w", err)
	}
	unix.Munmap(mem)
	return "writable+executable memory mapped", nil
}
