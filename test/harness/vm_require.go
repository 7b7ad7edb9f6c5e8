package harness

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

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
	requireBoot(t, VMTier, "boots a qemu VM")
	if o.Log == nil {
		o.Log = testLog{t}
	}
	return bootFor(t, time.Minute, func() (*VM, error) { return StartVM(context.Background(), o) })
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
