package harness

// One boot of a machine: the nspawn process, the container's systemd, and
// bringing both up and down.

import (
	"context"
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
	*tied  // nspawn
	nspawn procID
	init   procID // the container's systemd
	logf   func(string, ...any)
	name   string
}

// stop waits this long for nspawn to halt the machine after SIGTERM
// before it kills it.
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
	ctx, cancel := context.WithTimeout(ctx, m.o.BootTimeout)
	defer cancel()
	b, err := m.spawn()
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.cur = b
	m.mu.Unlock()
	if err := b.findInit(ctx); err != nil {
		return fmt.Errorf("%w\nconsole tail:\n%s", err, m.ConsoleTail(30))
	}
	if err := m.waitRunning(ctx, b); err != nil {
		return fmt.Errorf("%w\nconsole tail:\n%s", err, m.ConsoleTail(30))
	}
	m.logf("machine %s: booted in %v (nspawn pid %d, systemd pid %d)", m.name,
		time.Since(t0).Round(time.Millisecond), b.nspawn.pid, b.init.pid)
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
		"--private-network",
		// No host systemd to register with or to make a scope for us:
		// without these nspawn dies with "Failed to open system bus".
		"--register=no", "--keep-unit",
		"--link-journal=no",
		// Not a terminal: the console is copied to console.log.
		"--console=read-only",
		"--system-call-filter=" + allowedSyscalls,
	}
	argv = append(argv, m.o.NspawnArgs...)
	cmd := exec.Command(m.nspawn, argv...)
	cmd.Stdout, cmd.Stderr = console, console
	t, err := startTied(cmd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", m.nspawn, strings.Join(argv, " "), err)
	}
	b := &boot{tied: t, logf: m.logf, name: m.name}
	if b.nspawn, err = procOf(cmd.Process.Pid); err != nil {
		// Already gone: the wait below reports how.
		b.nspawn = procID{pid: cmd.Process.Pid}
	}
	if err := os.WriteFile(filepath.Join(m.dir, nspawnFile), []byte(b.nspawn.String()+"\n"), 0o644); err != nil {
		b.stop()
		return nil, err
	}
	return b, nil
}

// exited reports nspawn's exit if it has exited.
func (b *boot) exited() (bool, error) {
	select {
	case <-b.done:
		return true, fmt.Errorf("systemd-nspawn (pid %d) exited: %v", b.nspawn.pid, b.waitErr)
	default:
		return false, nil
	}
}

// findInit finds the container's systemd: the child of nspawn that is
// PID 1 of its own PID namespace, once it has exec'd systemd.
func (b *boot) findInit(ctx context.Context) error {
	for {
		if gone, err := b.exited(); gone {
			return err
		}
		for _, k := range children(b.nspawn.pid) {
			if isNamespaceInit(k) && comm(k) == "systemd" {
				id, err := procOf(k)
				if err == nil {
					b.init = id
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no systemd under systemd-nspawn (pid %d, children %v): %w", b.nspawn.pid, children(b.nspawn.pid), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitRunning polls `systemctl is-system-running` until running or
// degraded; degraded is logged with its failed units, not an error: the
// host's packages are many and a test says what it needs.
func (m *Machine) waitRunning(ctx context.Context, b *boot) error {
	var last string
	for {
		if gone, err := b.exited(); gone {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		out, errOut, err := m.run(cctx, b, []string{"systemctl", "is-system-running"})
		cancel()
		state := strings.TrimSpace(out)
		switch state {
		case "running":
			return nil
		case "degraded":
			failed, _, _ := m.run(ctx, b, []string{"systemctl", "list-units", "--failed", "--no-legend", "--plain"})
			m.logf("machine %s: degraded; failed units:\n%s", m.name, strings.TrimRight(failed, "\n"))
			return nil
		case "maintenance":
			return fmt.Errorf("systemctl is-system-running: maintenance (emergency or rescue mode)")
		}
		last = fmt.Sprintf("%q (%v; %s)", state, err, strings.TrimSpace(errOut))
		select {
		case <-ctx.Done():
			return fmt.Errorf("machine not running after %v: systemctl is-system-running last answered %s: %w", m.o.BootTimeout, last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop halts the machine: SIGTERM makes nspawn shut the container's
// systemd down in order; past stopTimeout nspawn and the container's init
// are killed (by the PIDs we started, checked against reuse).
func (b *boot) stop() error {
	t0 := time.Now()
	defer func() {
		b.logf("machine %s: nspawn %d stopped in %v (%v)", b.name, b.nspawn.pid, time.Since(t0).Round(time.Millisecond), b.waitErr)
	}()
	// Signal goes through a pidfd or Wait's bookkeeping: never a reused
	// PID. "process already finished" is fine.
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
		return nil
	case <-time.After(stopTimeout):
	}
	_ = b.cmd.Process.Kill()
	// nspawn's death normally takes the container with it; make sure.
	if b.init.pid > 0 && b.init.alive() {
		_ = syscall.Kill(b.init.pid, syscall.SIGKILL)
	}
	select {
	case <-b.done:
		return fmt.Errorf("systemd-nspawn (pid %d) did not halt the machine within %v of SIGTERM; killed it", b.nspawn.pid, stopTimeout)
	case <-time.After(5 * time.Second):
		return fmt.Errorf("systemd-nspawn (pid %d) still running after SIGKILL", b.nspawn.pid)
	}
}

// Reboot powers the machine off in order and boots it again on the same
// upper dir: files survive, tmpfs (/run, /tmp) and transient units do
// not, as on a real reboot. PID changes.
func (m *Machine) Reboot(ctx context.Context) error {
	m.mu.Lock()
	b := m.cur
	m.cur = nil
	m.mu.Unlock()
	if b == nil {
		return fmt.Errorf("harness: reboot machine %s: not running", m.name)
	}
	if err := b.stop(); err != nil {
		return fmt.Errorf("harness: reboot machine %s: power off: %w", m.name, err)
	}
	if err := m.boot(ctx); err != nil {
		return fmt.Errorf("harness: reboot machine %s: %w", m.name, err)
	}
	return nil
}

func (m *Machine) consolePath() string { return filepath.Join(m.dir, "console.log") }

// ConsoleTail is the last n lines of the machine's console, all boots,
// without terminal colours.
func (m *Machine) ConsoleTail(n int) string {
	b, err := os.ReadFile(m.consolePath())
	if err != nil {
		return fmt.Sprintf("(console: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(ansiRe.ReplaceAllString(string(b), ""), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
