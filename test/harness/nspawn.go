package harness

// One boot of a machine: the nspawn process, the container's systemd, and
// bringing both up and down.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// boot is one run of systemd-nspawn.
type boot struct {
	*booting        // nspawn
	init     procID // the container's systemd
}

// stopTimeout is how long nspawn gets to halt the machine after SIGTERM
// before it is killed.
const stopTimeout = 15 * time.Second

// Syscalls nspawn's own seccomp filter answers EPERM to, which the machine
// needs as a host has them: landlock (the agents' runner scopes IPC,
// docs/design.md, "Hardening at level process") and the keyring (crun
// gives each podman container a session keyring of its own).
const allowedSyscalls = "landlock_create_ruleset landlock_add_rule landlock_restrict_self keyctl add_key request_key"

// boot starts nspawn on the prepared root and waits until the machine's
// systemd says it is running.
func (m *Machine) boot(ctx context.Context) error {
	t0 := time.Now()
	b, err := m.spawn()
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.cur = b
	m.mu.Unlock()
	// The container's systemd is looked for often: it is there within
	// milliseconds, and the machine boots in about a second.
	if err := b.waitUp(ctx, m.o.BootTimeout,
		bootStep{20 * time.Millisecond, b.findInit},
		bootStep{100 * time.Millisecond, func(ctx context.Context) (bool, error) { return m.running(ctx, b) }},
	); err != nil {
		return fmt.Errorf("machine not running: %w", err)
	}
	m.logf("machine %s: booted in %v (nspawn pid %d, systemd pid %d)", m.name,
		time.Since(t0).Round(time.Millisecond), b.id.pid, b.init.pid)
	return nil
}

func (m *Machine) spawn() (*boot, error) {
	console, err := os.OpenFile(m.consolePath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer console.Close() // nspawn has its own copy once started
	fmt.Fprintf(console, "==== harness: boot at %s ====\n", time.Now().Format(time.RFC3339Nano))
	argv := []string{
		"-D", m.rootDir(), "--boot", "-M", m.name,
		// No host systemd to register with or to make a scope for us:
		// without these nspawn dies with "Failed to open system bus".
		"--register=no", "--keep-unit",
		"--link-journal=no",
		// Not a terminal: the console is copied to console.log.
		"--console=read-only",
		"--system-call-filter=" + allowedSyscalls,
	}
	if m.o.NetworkNamespace != "" {
		// nspawn keeps CAP_NET_ADMIN for --private-network only; the
		// namespace is the machine's own as that one would be, and its
		// root needs it there as on a host (nft, through ssh).
		argv = append(argv, "--network-namespace-path="+m.o.NetworkNamespace, "--capability=CAP_NET_ADMIN")
	} else {
		argv = append(argv, "--private-network")
	}
	argv = append(argv, m.o.NspawnArgs...)
	cgroups := machineCgroups(m.name)
	wrapped := inCgroups(cgroups, append([]string{m.nspawn}, argv...))
	cmd := exec.Command(wrapped[0], wrapped[1:]...)
	cmd.Env = append(os.Environ(), cgroupEnv(cgroups))
	cmd.Stdout, cmd.Stderr = console, console
	t, err := startTied(cmd, filepath.Join(m.dir, nspawnFile))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", m.nspawn, strings.Join(argv, " "), err)
	}
	// nspawn's own output is the console.
	return &boot{booting: &booting{tied: t, console: m.consolePath()}}, nil
}

// findInit finds the container's systemd: the child of nspawn that is
// PID 1 of its own PID namespace, once it has exec'd systemd.
func (b *boot) findInit(context.Context) (bool, error) {
	kids := children(b.id.pid)
	for _, k := range kids {
		if isNamespaceInit(k) && comm(k) == "systemd" {
			if id, err := procOf(k); err == nil {
				b.init = id
				return true, nil
			}
		}
	}
	return false, fmt.Errorf("no systemd under systemd-nspawn (pid %d, children %v)", b.id.pid, kids)
}

// running asks the machine's systemd once whether it is up (systemUp).
func (m *Machine) running(ctx context.Context, b *boot) (bool, error) {
	run := func(ctx context.Context, argv ...string) (string, string, error) { return m.run(ctx, b, argv) }
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	out, errOut, err := run(cctx, "systemctl", "is-system-running")
	cancel()
	state := strings.TrimSpace(out)
	if up, err := systemUp(ctx, "machine "+m.name, state, run, m.logf); up {
		return true, err
	}
	return false, fmt.Errorf("systemctl is-system-running answered %q (%v; %s)", state, err, strings.TrimSpace(errOut))
}

// stop halts the machine: SIGTERM makes nspawn shut the container's
// systemd down in order; past stopTimeout nspawn and the container's init
// are killed (nspawn's death normally takes the container with it; make
// sure).
func (m *Machine) stop(b *boot) error {
	t0 := time.Now()
	// Signal goes through a pidfd or Wait's bookkeeping: never a reused
	// PID. "process already finished" is fine.
	err := b.stop("SIGTERM", func() { _ = b.cmd.Process.Signal(syscall.SIGTERM) }, stopTimeout, b.init)
	if cerr := removeCgroups(machineCgroups(m.name)); cerr != nil {
		m.logf("machine %s: cgroups left behind: %v", m.name, cerr)
	}
	m.logf("machine %s: nspawn %d stopped in %v (%v)", m.name, b.id.pid, time.Since(t0).Round(time.Millisecond), b.waitErr)
	return err
}

// Reboot powers the machine off in order and boots it again on the same
// upper dir: files survive, tmpfs (/run, /tmp) and transient units do
// not, as on a real reboot. PID changes. Not a reboot from inside, as a
// VM's is (vm_qemu.go): there nspawn would exit with status 133 and leave
// the new boot to its caller (systemd-nspawn@.service's restart), so the
// harness boots it again itself either way.
func (m *Machine) Reboot(ctx context.Context) error {
	if err := m.powerOff(); err != nil {
		return fmt.Errorf("harness: reboot machine %s: power off: %w", m.name, err)
	}
	if err := m.powerOn(ctx); err != nil {
		return fmt.Errorf("harness: reboot machine %s: %w", m.name, err)
	}
	return nil
}

// PowerOff halts the machine in order and leaves it off, for as long as
// a test wants a host down: its disk (the upper dir) and its network
// namespace stay; Run and the files fail until PowerOn. Close still
// removes it.
func (m *Machine) PowerOff() error {
	if err := m.powerOff(); err != nil {
		return fmt.Errorf("harness: power off machine %s: %w", m.name, err)
	}
	return nil
}

// PowerOn boots a machine PowerOff left off, on the same disk, and
// returns once its systemd is running, as Start does.
func (m *Machine) PowerOn(ctx context.Context) error {
	if err := m.powerOn(ctx); err != nil {
		return fmt.Errorf("harness: power on machine %s: %w", m.name, err)
	}
	return nil
}

func (m *Machine) powerOff() error {
	m.mu.Lock()
	b := m.cur
	m.cur = nil
	m.mu.Unlock()
	if b == nil {
		return errors.New("not running")
	}
	return m.stop(b)
}

func (m *Machine) powerOn(ctx context.Context) error {
	m.mu.Lock()
	on, closed := m.cur != nil, m.closed
	m.mu.Unlock()
	switch {
	case closed:
		return errors.New("closed")
	case on:
		return errors.New("already running")
	}
	return m.boot(ctx)
}

func (m *Machine) consolePath() string { return filepath.Join(m.dir, "console.log") }

// ConsoleTail is the last n lines of the machine's console, all boots,
// without terminal colours.
func (m *Machine) ConsoleTail(n int) string { return consoleTail(m.consolePath(), n) }
