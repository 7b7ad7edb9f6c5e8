package sdnotify

// Tier: unit (a notify socket of the test's own; the test signals itself).

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// notifySocket is systemd's side: the datagrams the service sends.
func notifySocket(t *testing.T) *net.UnixConn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return c
}

// next is the next datagram, within a deadline.
func next(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 512)
	n, err := c.Read(b)
	if err != nil {
		t.Fatalf("waiting for a notification: %v", err)
	}
	return string(b[:n])
}

// A service is ready with its status, reloads on SIGHUP (a failed reload
// leaves it serving), and stops when its context ends; systemd hears each.
func TestServeTellsSystemd(t *testing.T) {
	sock := notifySocket(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reloads := make(chan int, 2)
	n := 0
	ended := make(chan error, 1)
	go func() {
		ended <- Serve(ctx, "bus on 127.0.0.1:4222", nil, func() error {
			n++
			reloads <- n
			if n == 1 {
				return errors.New("a bad config")
			}
			return nil
		})
	}()
	if got := next(t, sock); got != "READY=1\nSTATUS=bus on 127.0.0.1:4222" {
		t.Fatalf("first notification %q", got)
	}
	for want := 1; want <= 2; want++ {
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if got := next(t, sock); got != "RELOADING=1" {
			t.Fatalf("reload %d: %q, want RELOADING=1", want, got)
		}
		if got := <-reloads; got != want {
			t.Fatalf("reload %d ran as %d", want, got)
		}
		if got := next(t, sock); got != "READY=1" {
			t.Fatalf("after reload %d: %q, want READY=1", want, got)
		}
	}
	cancel()
	if got := next(t, sock); got != "STOPPING=1" {
		t.Fatalf("at the end: %q, want STOPPING=1", got)
	}
	if err := <-ended; err != nil {
		t.Fatalf("Serve: %v, want nil at the context's end", err)
	}
}

// A service that ends by itself ends Serve with its error.
func TestServeReturnsWhenTheServiceEnds(t *testing.T) {
	notifySocket(t)
	done := make(chan error, 1)
	done <- errors.New("listener closed")
	err := Serve(context.Background(), "proxy", done, func() error { return nil })
	if err == nil || err.Error() != "listener closed" {
		t.Fatalf("Serve: %v, want the service's error", err)
	}
}
