package test

// Tier: root + VM (qemu). A real reboot: transient agent units vanish with
// it, and flock.service must bring the provisioned flock back at boot
// (docs/design.md, "Units").

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/harness"
)

// TestVMRebootBringsTheFlockBack provisions the example flock, reboots the
// VM, and waits for the bus and the same three agents, same uids, to be
// active again without anyone running flockctl.
// Tier: root + VM (qemu).
func TestVMRebootBringsTheFlockBack(t *testing.T) {
	v := harness.BootVM(t)
	example, err := os.ReadFile("../examples/flock.yaml")
	if err != nil {
		t.Fatalf("the 3-agent example: %v", err)
	}
	vmProvision(t, v, string(example))
	before := vmWaitActive(t, v, 2*time.Minute, 1, 2, 3)
	if out := mustRun(t, v, "systemctl", "status", "--no-pager", "flock-agent@3"); !strings.Contains(out, "Active: active (running)") {
		t.Fatalf("systemctl status flock-agent@3 is not active (running):\n%s", out)
	}

	t0 := time.Now()
	if err := v.Reboot(context.Background()); err != nil {
		t.Fatal(err)
	}
	booted := time.Since(t0)

	var after []agentStatus
	v.Eventually(t, 3*time.Minute, func() error {
		if st, _, err := run(t, v, "systemctl", "is-active", "flock.service"); err != nil {
			return fmt.Errorf("flock.service is %s", strings.TrimSpace(st))
		}
		var err error
		if after, err = vmStatus(t, v); err != nil {
			return err
		}
		return allActive(after, 1, 2, 3)
	})
	t.Logf("FIGURE reboot: VM back in %v; flock.service and agents 1-3 active %v after the reboot began",
		booted.Round(time.Second), time.Since(t0).Round(time.Second))
	for i, a := range after {
		if b := before[i]; a.UID != b.UID || a.User != b.User {
			t.Errorf("agent %d: user %s uid %d after the reboot, was %s uid %d", a.ID, a.User, a.UID, b.User, b.UID)
		}
	}
	if out, _, err := run(t, v, "systemctl", "status", "--no-pager", "flock-agent@3"); err != nil || !strings.Contains(out, "Active: active (running)") {
		t.Errorf("systemctl status flock-agent@3 after the reboot (%v):\n%s", err, out)
	}
}
