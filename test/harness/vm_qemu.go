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
	"syscall"
	"time"
)

// kernelCmdline: the root file system is the overlay on vda; the console
// is the serial port qemu writes to console.log. mitigations=off because
// under software emulation every page-table switch flushes qemu's TLB:
// it makes the guest several times slower and protects nothing here.
// net.ifnames=0: the one network interface is eth0, as the image's
// vm-net.service expects.
const kernelCmdline = "root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 mitigations=off net.ifnames=0"

// portTries bounds retries when another process takes the free port
// between our probe and qemu's bind.
const portTries = 3

// boot starts qemu and waits until the guest's systemd is running. Each
// boot is a new qemu (Reboot, PowerCut), so whatever answers is the new
// boot.
func (v *VM) boot(ctx context.Context) error {
	var err error
	for try := 1; try <= portTries; try++ {
		if err = v.startQemu(); err != nil {
			return err
		}
		err = v.waitBooted(ctx)
		if err == nil {
			v.startMaster()
			return nil
		}
		q := v.takeQemu()
		if gone, _ := q.exited(); !gone || !strings.Contains(v.qemuLog(), "hostfwd") {
			if kerr := q.kill(); kerr != nil {
				v.logf("vm %s: %v", v.name, kerr)
			}
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
	qlog, err := os.OpenFile(v.qemuLogPath(), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer qlog.Close() // qemu has its own copy once started
	// -no-reboot: a reboot the guest asks for ends qemu, and Reboot
	// starts it again.
	argv := []string{
		"-name", v.name, "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-accel", accel(), "-cpu", "max", "-m", v.o.Memory, "-smp", strconv.Itoa(v.o.CPUs),
		"-kernel", v.img.Kernel, "-initrd", v.img.Initrd,
		"-append", kernelCmdline + " systemd.hostname=" + v.name,
		"-drive", "file=" + filepath.Join(v.dir, "overlay.qcow2") + ",format=qcow2,if=virtio,cache=" + v.diskCache(),
		"-serial", "file:" + v.consolePath(),
		// restrict=on: the guest reaches nothing outside; the forward in
		// still works (QEMU's documentation).
		"-nic", fmt.Sprintf("user,model=virtio-net-pci,restrict=on,hostfwd=tcp:127.0.0.1:%d-:22", port),
		"-device", "virtio-rng-pci",
	}
	cmd := exec.Command("qemu-system-x86_64", argv...)
	cmd.Stdout, cmd.Stderr = qlog, qlog
	// A session of its own, so an autogroup of its own (below).
	t, err := startTiedAs(cmd, filepath.Join(v.dir, qemuFile), &syscall.SysProcAttr{Setsid: true})
	if err != nil {
		return fmt.Errorf("qemu-system-x86_64 %s: %w", strings.Join(argv, " "), err)
	}
	raiseAutogroup(cmd.Process.Pid)
	v.mu.Lock()
	v.q = &booting{tied: t, console: v.consolePath(), output: v.qemuLogPath()}
	v.mu.Unlock()
	return nil
}

// qemuAutogroupNice weighs a guest's CPU against the system tier's beside
// it (make test runs the two at once). With autogroup scheduling each
// session shares the CPU as one, and every service in the system tier's
// machines is a session of its own (systemd makes each one), while both
// of a guest's vCPUs are one: beside the system tier a guest's boot took
// 27-49 s instead of 17. At -5 a guest weighs about as much as three busy
// services, and the system tier, which mostly waits, takes up the rest.
const qemuAutogroupNice = -5

// raiseAutogroup gives pid's autogroup qemuAutogroupNice. A scheduling
// hint only: a kernel without autogroups has no such file, and nothing
// depends on it, so a failure is let be.
func raiseAutogroup(pid int) {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/autogroup", pid), []byte(strconv.Itoa(qemuAutogroupNice)), 0)
}

// diskCache is qemu's cache mode for the overlay. unsafe: the overlay is
// thrown away with the VM, and a guest reboot ends qemu in order (it
// writes out what it holds), so nothing written is lost across it. writeback, for power cuts: a guest flush
// makes qemu write its qcow2 metadata and fdatasync the overlay, so what
// the guest flushed is on the host; what it wrote since may still be in
// qemu (a new cluster's mapping), and is lost with it (PowerCut).
func (v *VM) diskCache() string {
	if v.o.PowerCuts {
		return "writeback"
	}
	return "unsafe"
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

// waitBooted polls over ssh until systemd says it is up (systemUp).
func (v *VM) waitBooted(ctx context.Context) error {
	q := v.qemu()
	if q == nil {
		return errors.New("VM not running")
	}
	run := func(ctx context.Context, argv ...string) (string, string, error) { return v.Run(ctx, argv...) }
	// Each try is an ssh handshake with an emulated guest, which costs it
	// CPU its boot needs: once a second until sshd answers, then one wait for systemd to finish starting.
	err := q.waitUp(ctx, v.o.BootTimeout, bootStep{time.Second, func(ctx context.Context) (bool, error) {
		// A try made while the guest is down hangs on the forwarded port
		// (QEMU accepts, the guest never answers, or a connection to the
		// old boot is never closed): cut it short and try again.
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		out, errOut, err := v.runSSH(cctx, []string{"-o", "ConnectTimeout=5"}, nil, "cat", "/proc/sys/kernel/random/boot_id")
		cancel()
		if id := strings.TrimSpace(string(out)); err != nil || id == "" {
			return false, fmt.Errorf("boot_id answered %q (%v; %s)", id, err, strings.TrimSpace(errOut))
		}
		// sshd is up: one connection waits until systemd
		// has started everything (--wait), bounded by the boot's timeout.
		out, errOut, err = v.runSSH(ctx, []string{"-o", "ConnectTimeout=5"}, nil, "systemctl", "is-system-running", "--wait")
		state := strings.TrimSpace(string(out))
		if up, err := systemUp(ctx, "vm "+v.name, state, run, v.logf); up {
			return true, err
		}
		return false, fmt.Errorf("systemctl is-system-running --wait answered %q (%v; %s)", state, err, strings.TrimSpace(errOut))
	}})
	if err != nil {
		return fmt.Errorf("VM not running: %w", err)
	}
	return nil
}

// Reboot reboots the guest with `systemctl reboot` and waits until ssh
// answers from the new boot and systemd is running or degraded. Files
// survive; tmpfs and transient units do not. The guest shuts down in
// order, and its reboot ends qemu (-no-reboot), which Reboot starts again
// on the same disk. Under software emulation a guest reset inside the
// same qemu was seen to boot two to five times slower than in a new qemu
// (40-90 s instead of about 15; the guest burns about 20 s of CPU just
// after it starts systemd, which a new qemu does not).
func (v *VM) Reboot(ctx context.Context) error {
	t0 := time.Now()
	v.stopMaster()
	// --no-block: queue the reboot and return before the connection
	// drops. qemu's exit says the guest went down.
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	_, _, _ = v.Run(rctx, "systemctl", "--no-block", "reboot")
	cancel()
	q := v.takeQemu()
	if q == nil {
		return fmt.Errorf("harness: reboot VM %s: not running", v.name)
	}
	select {
	case <-q.done:
	case <-time.After(shutdownWait):
		err := fmt.Errorf("harness: reboot VM %s: the guest did not go down within %v (qemu pid %d still runs): console tail:\n%s",
			v.name, shutdownWait, q.id.pid, consoleTail(v.consolePath(), 30))
		return errors.Join(err, q.kill())
	}
	if err := v.boot(ctx); err != nil {
		return fmt.Errorf("harness: reboot VM %s: %w", v.name, err)
	}
	v.logf("vm %s: rebooted in %v (qemu pid %d)", v.name, time.Since(t0).Round(time.Millisecond), v.qemu().id.pid)
	return nil
}

// shutdownWait bounds a guest's orderly shutdown before its reboot.
const shutdownWait = 2 * time.Minute

// PowerCut cuts the VM's power and turns it on again: qemu is killed by
// its pid (SIGKILL: no shutdown, no flush), then started again on the
// same disk, and PowerCut returns once ssh answers and systemd is up. The
// guest loses its memory, so every write its kernel had not yet sent to
// the disk (the page cache); with VMOptions.PowerCuts the disk also
// loses what the guest had not flushed (see diskCache). That is a power
// cut for the guest's file systems and programs: what was fsynced is
// kept, the rest may not be. The host's own page cache is not dropped
// (qemu's writes to the overlay outlive qemu), which is a disk whose own
// cache had written back: a cut loses at most what a real one may.
// booted is how long the new boot took, from the kill.
func (v *VM) PowerCut(ctx context.Context) (booted time.Duration, err error) {
	q := v.takeQemu()
	if q == nil {
		return 0, fmt.Errorf("harness: power cut of VM %s: not running", v.name)
	}
	t0 := time.Now()
	if err := q.kill(); err != nil {
		return 0, fmt.Errorf("harness: power cut of VM %s: %w", v.name, err)
	}
	v.stopMaster()
	if err := v.boot(ctx); err != nil {
		return 0, fmt.Errorf("harness: power cut of VM %s: booting again: %w", v.name, err)
	}
	booted = time.Since(t0)
	v.logf("vm %s: power cut (qemu pid %d killed), booted again in %v (qemu pid %d)", v.name, q.id.pid, booted.Round(time.Millisecond), v.qemu().id.pid)
	return booted, nil
}

// powerOff ends the VM: qemu killed by its pid. Its disk is thrown away
// with it, so an orderly shutdown would keep nothing and cost an emulated
// guest seconds.
func (v *VM) powerOff(q *booting) error {
	t0 := time.Now()
	err := q.kill()
	v.logf("vm %s: powered off in %v (%v)", v.name, time.Since(t0).Round(time.Millisecond), err)
	return err
}

func (v *VM) qemu() *booting {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.q
}

// stopMaster stops the ssh master of the boot that is ending.
func (v *VM) stopMaster() {
	v.mu.Lock()
	m := v.master
	v.master = nil
	v.mu.Unlock()
	m.stop()
}

func (v *VM) takeQemu() *booting {
	v.mu.Lock()
	defer v.mu.Unlock()
	q := v.q
	v.q = nil
	return q
}

func (v *VM) qemuLogPath() string { return filepath.Join(v.dir, "qemu.log") }

func (v *VM) qemuLog() string {
	b, _ := os.ReadFile(v.qemuLogPath())
	return string(b)
}

func (v *VM) consolePath() string { return filepath.Join(v.dir, "console.log") }

// ConsoleTail is the last n lines of the VM's serial console, all boots,
// without terminal colours.
func (v *VM) ConsoleTail(n int) string { return consoleTail(v.consolePath(), n) }
