// Package sdnotify runs a service's life as systemd's Type=notify wants
// it: ready, reloading on SIGHUP, stopping. flock.service (busd) and
// flock-proxy.service (proxyd) both live by it.
package sdnotify

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Serve tells systemd the service is ready (status: its STATUS= line),
// reloads on SIGHUP (telling systemd it is reloading, then ready again)
// and returns when ctx ends (nil, after telling systemd it is stopping)
// or done says the service ended. Not under systemd there is no one to
// tell: that is fine. A failed reload is logged and the service goes on
// with what it had.
func Serve(ctx context.Context, status string, done <-chan error, reload func() error) error {
	// SIGHUP is caught before systemd hears of the service: a reload
	// asked for at once must not meet the signal's default, the end.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	_, _ = daemon.SdNotify(false, daemon.SdNotifyReady+"\nSTATUS="+status)
	for {
		select {
		case <-ctx.Done():
			_, _ = daemon.SdNotify(false, daemon.SdNotifyStopping)
			return nil
		case err := <-done:
			return err
		case <-hup:
			_, _ = daemon.SdNotify(false, daemon.SdNotifyReloading)
			if err := reload(); err != nil {
				fmt.Fprintf(os.Stderr, "[ERR] reload: %v\n", err)
			}
			_, _ = daemon.SdNotify(false, daemon.SdNotifyReady)
		}
	}
}
