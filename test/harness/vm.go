package harness

// VMs for the tier the nspawn machines cannot give (docs/design.md, "Test
// tiers": the VM): a real kernel with full cgroup v2, so MemoryMax,
// TasksMax and CPUQuota are enforced, and a real reboot.
//
// A VM boots Debian's cloud kernel under qemu (software emulation: these
// machines have no usable KVM) from a qcow2 overlay on the cached image
// (vm_image.go), so the image is never modified and each VM starts from
// it fresh. It reaches nothing outside: its only network is QEMU's user
// network with restrict=on, and the one way in is ssh forwarded from a
// free port on 127.0.0.1. Everything per VM lives under
// /var/tmp/flock-vm/<name>/ and is removed by Close.

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// VMOptions says how to boot a VM. The zero value boots one with 2 GiB,
// two CPUs and the project's binaries installed.
type VMOptions struct {
	// Memory is qemu's -m; default 2G.
	Memory string
	// CPUs is qemu's -smp; default 2.
	CPUs int
	// Log receives progress lines (image build or reuse, boot, teardown);
	// nil discards them. BootVM sends them to t.Log.
	Log io.Writer
	// NoBinaries skips building and installing the project's binaries.
	NoBinaries bool
	// Binaries are more files to install, name in /usr/local/bin -> path
	// on the host. They override the built ones of the same name. The
	// image a VM boots has them in place (vm_layer.go).
	Binaries map[string]string
	// BootTimeout bounds each boot until `systemctl is-system-running`
	// says running or degraded; default 5 minutes (software emulation).
	BootTimeout time.Duration
	// PowerCuts gives the VM a disk that keeps what the guest flushed and
	// no more, for PowerCut: qemu's cache=writeback on the qcow2 overlay
	// (guest flushes reach the host file with its metadata; the rest
	// waits in qemu). Without it the disk ignores flushes (cache=unsafe:
	// faster, and nothing is lost while qemu runs).
	PowerCuts bool
}

// SSHTarget is how to reach a VM with ssh (or Ansible) as root.
type SSHTarget struct {
	Host           string // always 127.0.0.1
	Port           int
	User           string // root
	KeyFile        string // private key; shared by all VMs of the image
	KnownHostsFile string // the VM's host key at [Host]:Port
}

// VM is one running qemu VM. Its methods may be called from several
// goroutines, but Reboot and Close not at the same time.
type VM struct {
	instance
	o    VMOptions
	img  *vmImage
	port int

	mu     sync.Mutex
	q      *booting // qemu; nil when not running
	master *sshMaster
}

const defaultVMBootTimeout = 5 * time.Minute

// StartVM boots a VM and returns it with ssh answering and systemd
// running. ctx bounds the start only; the VM lives until Close. On error
// nothing is left behind.
func StartVM(ctx context.Context, o VMOptions) (*VM, error) {
	if o.Memory == "" {
		o.Memory = "2G"
	}
	if o.CPUs <= 0 {
		o.CPUs = 2
	}
	if o.BootTimeout <= 0 {
		o.BootTimeout = defaultVMBootTimeout
	}
	name := fmt.Sprintf("flock-vm-%d-%d", os.Getpid(), seq.Add(1))
	v := &VM{instance: instance{name: name, dir: filepath.Join(vmParentDir, name), dirs: vmDirs, log: o.Log}, o: o}
	if err := v.startOrTearDown(func() error { return v.start(ctx) }, v.Close); err != nil {
		return nil, err
	}
	return v, nil
}

func (v *VM) start(ctx context.Context) error {
	bins := map[string]string{}
	if !v.o.NoBinaries {
		var err error
		if bins, err = projectBinaries(); err != nil {
			return err
		}
	}
	for name, p := range v.o.Binaries {
		bins[name] = p
	}
	img, err := cachedImage(v.logf)
	if err != nil {
		return err
	}
	v.img = img
	base := img.Base
	if len(bins) > 0 {
		if base, err = binariesLayer(img, bins, v.logf); err != nil {
			return err
		}
	}
	if err := v.claim(); err != nil {
		return err
	}
	overlay := filepath.Join(v.dir, "overlay.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-b", base, "-F", "raw", overlay).CombinedOutput(); err != nil {
		return fmt.Errorf("qemu-img create -b %s %s: %w: %s", base, overlay, err, out)
	}
	t0 := time.Now()
	if err := v.boot(ctx); err != nil {
		return err
	}
	v.logf("vm %s: booted in %v (qemu pid %d, ssh on 127.0.0.1:%d)", v.name, time.Since(t0).Round(time.Millisecond), v.q.id.pid, v.port)
	return nil
}

// Name is the VM's name (also its hostname).
func (v *VM) Name() string { return v.name }

// Dir is the VM's directory on the host (overlay.qcow2, console.log,
// qemu.log, known_hosts).
func (v *VM) Dir() string { return v.dir }

// SSH is how to reach the VM as root, e.g. for an Ansible inventory.
func (v *VM) SSH() SSHTarget {
	t := SSHTarget{Host: "127.0.0.1", Port: v.port, User: "root", KnownHostsFile: v.knownHosts()}
	if v.img != nil {
		t.KeyFile = v.img.Key
	}
	return t
}

// Close powers the VM off (qemu is killed: the disk goes with it) and
// removes its directory, overlay disk included. It always tries every
// step, is idempotent, and a nil VM is fine.
func (v *VM) Close() error {
	if v == nil {
		return nil
	}
	return v.close(func() error {
		v.mu.Lock()
		q, m := v.q, v.master
		v.q, v.master = nil, nil
		v.mu.Unlock()
		m.stop()
		if q == nil {
			return nil
		}
		return v.powerOff(q)
	})
}
