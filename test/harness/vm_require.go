package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// vmTools are what building the image and running a VM need, and the
// Debian package of each (make deps installs them).
var vmTools = []struct{ tool, pkg string }{
	{"qemu-system-x86_64", "qemu-system-x86"},
	{"qemu-img", "qemu-utils"},
	{"debootstrap", "debootstrap"},
	{"mkfs.ext4", "e2fsprogs"},
	{"ssh", "openssh-client"},
	{"ssh-keygen", "openssh-client"},
	{"unshare", "util-linux"},
}

// requireVM applies Require to what a VM needs.
func requireVM(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("boots a qemu VM: not with -short")
	}
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, fmt.Sprintf("running as uid %d", os.Geteuid()))
	}
	for _, x := range vmTools {
		if _, err := exec.LookPath(x.tool); err != nil {
			missing = append(missing, fmt.Sprintf("%v (apt-get install %s)", err, x.pkg))
		}
	}
	if _, err := debianMirror(); err != nil {
		missing = append(missing, err.Error())
	}
	Require(t, "needs root, qemu, debootstrap and a Debian mirror (make deps): "+strings.Join(missing, "; "), len(missing) == 0)
}

// BootVM boots a VM with the project's binaries for the test, or skips or
// fails it by Require's rule. The VM is powered off and removed when the
// test ends; if the test failed, its console tail and journal are logged
// first.
func BootVM(t testing.TB) *VM {
	t.Helper()
	return BootVMWith(t, VMOptions{})
}

// BootVMWith is BootVM with options; Log defaults to the test's log.
func BootVMWith(t testing.TB, o VMOptions) *VM {
	t.Helper()
	requireVM(t)
	if o.Log == nil {
		o.Log = testLog{t}
	}
	v, err := StartVM(context.Background(), o)
	if err != nil {
		t.Fatalf("boot VM: %v", err)
	}
	closeAtEnd(t, "vm "+v.name, v, time.Minute)
	return v
}

// Eventually calls cond until it returns nil and fails the test with
// cond's last error if that takes longer than timeout (as
// Machine.Eventually; each try of a VM condition is an ssh round trip).
func (v *VM) Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	Eventually(t, timeout, cond)
}

// newCmd is exec.Command for the image build's tools: apt and dpkg in
// the chroot must neither ask nor translate.
func newCmd(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C.UTF-8")
	return cmd
}
