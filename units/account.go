package units

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"strings"

	"github.com/google/renameio/v2"
)

// BusUser is flock.service's user. The unit keeps DynamicUser=yes (and
// what it implies), but the account is static, made by a sysusers.d
// drop-in: systemd then uses it rather than allocate one. dbus-daemon
// resolves its peers' uids without nss-systemd's dynamic users
// (SYSTEMD_NSS_DYNAMIC_BYPASS, set by systemd to avoid a deadlock) and
// drops a peer it cannot resolve, so only a static account lets the bus
// read the agents' units over the system bus for /metrics.
const BusUser = "flock-bus"

// BusSysusersPath is the bus account's drop-in; systemd-sysusers
// re-applies it at boot.
const BusSysusersPath = "/etc/sysusers.d/flock-bus.conf"

// busSysusers is the drop-in: a system user and its group, no home, no
// shell; the uid is the first free one of the system range.
const busSysusers = "# Written by flockctl provision; flockctl deprovision --all removes it.\n" +
	"u " + BusUser + ` - "flock bus (flock.service)" / /usr/sbin/nologin` + "\n"

// staticAccounts are the static units whose user is one of flock's
// accounts.
var staticAccounts = map[string]struct{ user, dropIn, content string }{
	BusUnit: {BusUser, BusSysusersPath, busSysusers},
}

// ensureAccount writes the unit's account drop-in and has systemd-sysusers
// create the account if it is missing. Idempotent.
func ensureAccount(ctx context.Context, name string) error {
	a, ok := staticAccounts[name]
	if !ok {
		return nil
	}
	if old, err := os.ReadFile(a.dropIn); err != nil || string(old) != a.content {
		if err := os.MkdirAll("/etc/sysusers.d", 0o755); err != nil {
			return fmt.Errorf("writing %s: %w", a.dropIn, err)
		}
		if err := renameio.WriteFile(a.dropIn, []byte(a.content), 0o644, renameio.WithStaticPermissions(0o644)); err != nil {
			return fmt.Errorf("writing %s: %w", a.dropIn, err)
		}
	}
	if hasAccount(name) {
		return nil
	}
	if out, err := exec.CommandContext(ctx, "systemd-sysusers", a.dropIn).CombinedOutput(); err != nil {
		return fmt.Errorf("systemd-sysusers %s (creating %s's user %s): %w: %s", a.dropIn, name, a.user, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// hasAccount says whether the named unit's static account exists (true
// for a unit that has none).
func hasAccount(name string) bool {
	a, ok := staticAccounts[name]
	if !ok {
		return true
	}
	_, err := user.Lookup(a.user)
	return err == nil
}

// removeAccount deletes the unit's account, its group and its drop-in.
// An account already gone is not an error.
func removeAccount(ctx context.Context, name string) error {
	a, ok := staticAccounts[name]
	if !ok {
		return nil
	}
	if err := os.Remove(a.dropIn); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", a.dropIn, err)
	}
	if _, err := user.Lookup(a.user); err == nil {
		if out, err := exec.CommandContext(ctx, "userdel", a.user).CombinedOutput(); err != nil {
			return fmt.Errorf("userdel %s: %w: %s", a.user, err, strings.TrimSpace(string(out)))
		}
	}
	if _, err := user.LookupGroup(a.user); err == nil {
		if out, err := exec.CommandContext(ctx, "groupdel", a.user).CombinedOutput(); err != nil {
			return fmt.Errorf("groupdel %s: %w: %s", a.user, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
