package harness

// The qemu process of a VM: starting it on a free loopback port, waiting
// until the guest's systemd is up, rebooting and powering it off.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

type qemuProc struct {
	*tied
	id procID
}

func (q *qemuProc) exited() (bool, error) {
	select {
	case <-q.done:
		return true, fmt.Errorf("qemu (pid %d) exited: %v", q.id.pid, q.waitErr)
	default:
		return false, nil
	}
}

// kernelCmdline: the root file system is the overlay on vda; the console
// is the serial port qemu writes to console.log. mitigations=off because
// under software emulation every page-table switch flushes qemu's TLB:
// it makes the guest several times slower and protects nothing here.
const kernelCmdline = "root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 mitigations=off"

// portTries bounds retries when another process takes the free port
// between our probe and qemu's bind.
const portTries = 3

// boot starts qemu and waits until the guest's systemd is running.
func (v *VM) boot(ctx context.Context) error {
	var err error
	for try := 1; try <= portTries; try++ {
		if err = v.startQemu(); err != nil {
			return err
		}
		err = v.waitBooted(ctx, "")
		if err == nil {
			v.startMaster()
			return nil
		}
		q := v.takeQemu()
		if gone, _ := q.exited(); !gone || !strings.Contains(v.qemuLog(), "hostfwd") {
			v.kill(q)
			return err
		}
		v.logf("vm %s: port %d taken before qemu bound it; another try", v.name, v.port)
	}
	return err
}

// accel: these machines have a /dev/kvm that hangs the guest, so software
// emulation unless FLOCK_VM_ACCEL says otherwise (kvm on a laptop).
func accel() string {
	if a := os.Getenv("FLOCK_VM_ACCEL"); a != "" {
		return a
	}
	return "tcg"
}

func (v *VM) startQemu() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	v.port = port
	if err := os.WriteFile(v.knownHosts(), v.knownHostsLine(), 0o644); err != nil {
		return err
	}
	qlog, err := os.OpenFile(filepath.Join(v.dir, "qemu.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer qlog.Close() // qemu has its own copy once started
	argv := []string{
		"-name", v.name, "-nodefaults", "-no-user-config", "-display", "none",
		"-accel", accel(), "-cpu", "max", "-m", v.o.Memory, "-smp", strconv.Itoa(v.o.CPUs),
		"-kernel", v.img.Kernel, "-initrd", v.img.Initrd,
		"-append", kernelCmdline + " systemd.hostname=" + v.name,
		// cache=unsafe: the overlay is thrown away with the VM; a guest
		// reboot keeps qemu, so nothing written is lost across it.
		"-drive", "file=" + filepath.Join(v.dir, "overlay.qcow2") + ",format=qcow2,if=virtio,cache=unsafe",
		"-serial", "file:" + v.consolePath(),
		// restrict=on: the guest reaches nothing outside; the forward in
		// still works (QEMU's documentation).
		"-nic", fmt.Sprintf("user,model=virtio-net-pci,restrict=on,hostfwd=tcp:127.0.0.1:%d-:22", port),
		"-device", "virtio-rng-pci",
	}
	cmd := exec.Command("qemu-system-x86_64", argv...)
	cmd.Stdout, cmd.Stderr = qlog, qlog
	t, err := startTied(cmd)
	if err != nil {
		return fmt.Errorf("qemu-system-x86_64 %s: %w", strings.Join(argv, " "), err)
	}
	q := &qemuProc{tied: t}
	if q.id, err = procOf(cmd.Process.Pid); err != nil {
		q.id = procID{pid: cmd.Process.Pid} // already gone; waitBooted says how
	}
	v.mu.Lock()
	v.q = q
	v.mu.Unlock()
	return os.WriteFile(filepath.Join(v.dir, qemuFile), []byte(q.id.String()+"\n"), 0o644)
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port on 127.0.0.1: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitBooted polls over ssh until systemd says running or degraded, and,
// when oldBootID is given, until the boot id differs from it (a reboot
// really happened). Degraded is logged with its failed units.
func (v *VM) waitBooted(ctx context.Context, oldBootID string) error {
	ctx, cancel := context.WithTimeout(ctx, v.o.BootTimeout)
	defer cancel()
	var last string
	for {
		q := v.qemu()
		if q == nil {
			return errors.New("VM not running")
		}
		if gone, err := q.exited(); gone {
			return fmt.Errorf("%w\nqemu.log:\n%s\nconsole tail:\n%s", err, tail(v.qemuLog(), 2000), v.ConsoleTail(30))
		}
		// A try made while the guest is down hangs on the forwarded port
		// (QEMU accepts, the guest never answers, or a connection to the
		// old boot is never closed): cut it short and try again.
		cctx, ccancel := context.WithTimeout(ctx, 15*time.Second)
		out, errOut, err := v.runSSH(cctx, []string{"-o", "ConnectTimeout=5"}, nil,
			"sh", "-c", "cat /proc/sys/kernel/random/boot_id; systemctl is-system-running")
		ccancel()
		f := strings.Fields(string(out))
		state := ""
		if len(f) == 2 && f[0] != oldBootID {
			state = f[1]
		}
		switch state {
		case "running":
			return nil
		case "degraded":
			failed, _, _ := v.Run(ctx, "systemctl", "list-units", "--failed", "--no-legend", "--plain")
			v.logf("vm %s: degraded; failed units:\n%s", v.name, strings.TrimRight(failed, "\n"))
			return nil
		case "maintenance":
			return fmt.Errorf("systemctl is-system-running: maintenance (emergency or rescue mode)\nconsole tail:\n%s", v.ConsoleTail(30))
		}
		last = fmt.Sprintf("%q (%v; %s)", strings.TrimSpace(string(out)), err, strings.TrimSpace(errOut))
		select {
		case <-ctx.Done():
			return fmt.Errorf("VM not running after %v: boot_id and systemctl is-system-running last answered %s: %w\nconsole tail:\n%s",
				v.o.BootTimeout, last, ctx.Err(), v.ConsoleTail(30))
		case <-time.After(time.Second):
		}
	}
}

// Reboot reboots the guest with `systemctl reboot` (qemu stays, the disk
// is the same) and waits until ssh answers from the new boot and systemd
// is running or degraded. Files survive; tmpfs and transient units do not.
func (v *VM) Reboot(ctx context.Context) error {
	t0 := time.Now()
	id, err := v.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return fmt.Errorf("harness: reboot VM %s: %w", v.name, err)
	}
	v.mu.Lock()
	m := v.master
	v.master = nil
	v.mu.Unlock()
	m.stop()
	// --no-block: queue the reboot and return before the connection
	// drops. Only the new boot id says whether the reboot happened.
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, _, _ = v.Run(rctx, "systemctl", "--no-block", "reboot")
	cancel()
	if err := v.waitBooted(ctx, strings.TrimSpace(string(id))); err != nil {
		return fmt.Errorf("harness: reboot VM %s: %w", v.name, err)
	}
	v.startMaster()
	v.logf("vm %s: rebooted in %v", v.name, time.Since(t0).Round(time.Millisecond))
	return nil
}

// powerOffWait is how long the guest gets to shut down in order.
const powerOffWait = 90 * time.Second

// powerOff shuts the guest down with systemctl poweroff, and kills qemu
// (the process we started, never one found by name) if it lingers.
func (v *VM) powerOff(q *qemuProc) error {
	if gone, _ := q.exited(); gone {
		return nil
	}
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	_, _, _ = v.run(ctx, nil, "systemctl", "--no-block", "poweroff")
	cancel()
	select {
	case <-q.done:
		v.logf("vm %s: powered off in %v", v.name, time.Since(t0).Round(time.Millisecond))
		return nil
	case <-time.After(powerOffWait):
	}
	v.kill(q)
	return fmt.Errorf("qemu (pid %d) still running %v after systemctl poweroff; killed it", q.id.pid, powerOffWait)
}

// kill ends qemu through its exec.Cmd (a pidfd or Wait's bookkeeping,
// never a reused PID) and waits for it.
func (v *VM) kill(q *qemuProc) {
	if q == nil {
		return
	}
	_ = q.cmd.Process.Kill()
	select {
	case <-q.done:
	case <-time.After(10 * time.Second):
		v.logf("vm %s: qemu (pid %d) still running 10 s after SIGKILL", v.name, q.id.pid)
	}
}

func (v *VM) qemu() *qemuProc {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.q
}

func (v *VM) takeQemu() *qemuProc {
	v.mu.Lock()
	defer v.mu.Unlock()
	q := v.q
	v.q = nil
	return q
}

func (v *VM) qemuLog() string {
	b, _ := os.ReadFile(filepath.Join(v.dir, "qemu.log"))
	return string(b)
}

func (v *VM) consolePath() string { return filepath.Join(v.dir, "console.log") }

// ConsoleTail is the last n lines of the VM's serial console, all boots,
// without terminal colours.
func (v *VM) ConsoleTail(n int) string {
	b, err := os.ReadFile(v.consolePath())
	if err != nil {
		return fmt.Sprintf("(console: %v)", err)
	}
	s := strings.ReplaceAll(ansiRe.ReplaceAllString(string(b), ""), "\r", "")
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
