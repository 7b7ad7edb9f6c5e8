package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// lockPath serialises the verbs that change the host: two provisions at
// once (two Ansible runs, an operator and a timer) would interleave their
// plans. The kernel drops the lock when the process dies, however it dies.
const lockPath = "/run/flockctl.lock"

// lockHost takes the lock, waiting (and saying so) while another flockctl
// holds it. unlock releases it.
func lockHost(w io.Writer) (unlock func(), err error) {
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", lockPath, err)
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		fmt.Fprintf(w, "waiting for another flockctl to finish (it holds %s)\n", lockPath)
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", lockPath, err)
	}
	return func() { f.Close() }, nil
}

// tryLockHost takes the lock if no one holds it; ok is false if someone
// does.
func tryLockHost() (unlock func(), ok bool, err error) {
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("opening %s: %w", lockPath, err)
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		f.Close()
		return nil, false, nil
	}
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("locking %s: %w", lockPath, err)
	}
	return func() { f.Close() }, true, nil
}
