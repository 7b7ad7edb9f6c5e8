package harness

// Each VM's directory, /var/tmp/flock-vm/<name>/: its qcow2 overlay,
// console log, known_hosts and ssh control socket. Claimed and swept like
// the machines' directories (workdir.go), by owner process and qemu PID.

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// vmParentDir is not /tmp, for the same reason as parentDir.
const vmParentDir = "/var/tmp/flock-vm"

const qemuFile = "qemu.pid" // procID of the VM's qemu, while it runs

// claimVMDir creates dir and records this process as its owner, first
// sweeping the dirs of VMs whose owner and qemu are both gone.
func claimVMDir(dir string, logf func(string, ...any)) error {
	if err := os.MkdirAll(vmParentDir, 0o755); err != nil {
		return err
	}
	unlock, err := lockFile(filepath.Join(vmParentDir, ".lock"))
	if err != nil {
		return err
	}
	defer unlock()
	ents, _ := os.ReadDir(vmParentDir)
	for _, e := range ents {
		d := filepath.Join(vmParentDir, e.Name())
		if e.IsDir() && staleVMDir(d) {
			err := removeDir(d)
			logf("harness: removed stale %s: %v", d, err)
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("vm dir: %w (a live VM of that name?)", err)
	}
	self, err := procOf(os.Getpid())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(self.String()+"\n"), 0o644)
}

func staleVMDir(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		fi, serr := os.Stat(dir)
		return serr == nil && time.Since(fi.ModTime()) > time.Minute
	}
	if owner, err := parseProcID(string(b)); err == nil && owner.alive() {
		return false
	}
	// qemu was started with a parent-death signal; if it still runs it
	// is on its way down, and its disk must stay until it is.
	if b, err := os.ReadFile(filepath.Join(dir, qemuFile)); err == nil {
		if q, err := parseProcID(string(b)); err == nil && q.alive() && comm(q.pid) == "qemu-system-x86" {
			return false
		}
	}
	return true
}
