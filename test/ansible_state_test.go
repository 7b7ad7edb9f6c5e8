package test

// The Ansible role's later steps on a real host: files of root's from the
// inventory and flock_state: absent (TestAnsibleRole, on a machine), and a
// gvisor agent rolled out by the role (TestVMAnsible, on a fresh VM).

import (
	"crypto/sha256"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/harness"
)

// roleKeyFile is a flock_files entry as a provider's key_file would be.
const roleKeyFile = "/etc/flock/keys/test-provider"

// roleFiles plays flock_files in and checks them: root's, 0600, in a
// directory of root's alone, their content never in the play's output,
// and a second run changes nothing. It returns the vars that keep them.
//
// Tier: as TestAnsibleRole's.
func roleFiles(t *testing.T, p *harness.AnsiblePlayer, m runner) map[string]any {
	t.Helper()
	secret := "sk-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	vars := map[string]any{"flock_files": []map[string]string{{"path": roleKeyFile, "content": secret}}}
	t.Run("flock_files are root's, 0600, and never shown", func(t *testing.T) {
		r := p.Play(t, vars, "--diff")
		r.MustSucceed(t)
		r.AssertTasks(t, map[string]string{
			"Create the directories of flock_files": "changed",
			"Write flock_files (root's, 0600)":      "changed",
		})
		if strings.Contains(r.Out, secret) {
			t.Errorf("the play shows a flock_files content:\n%s", r.Out)
		}
		if got := strings.TrimSpace(mustRun(t, m, "stat", "-c", "%U:%G %a", roleKeyFile, "/etc/flock/keys")); got != "root:root 600\nroot:root 700" {
			t.Errorf("%s and its directory: %q, want root:root 600 and root:root 700", roleKeyFile, got)
		}
		if got := mustRun(t, m, "cat", roleKeyFile); got != secret {
			t.Errorf("%s holds %q, want the content given", roleKeyFile, got)
		}
		r = p.Play(t, vars)
		r.MustSucceed(t)
		if r.Recap.Changed != 0 {
			t.Errorf("the run after: changed=%d, want 0\n%s", r.Recap.Changed, r.Out)
		}
	})
	return vars
}

// roleAbsent takes the flock away with flock_state: absent (and
// flock_purge): --check says so and changes nothing, the run removes
// what flockctl and the role put on the host, and the runs after it
// (with --check too) change nothing.
//
// Tier: as TestAnsibleRole's.
func roleAbsent(t *testing.T, p *harness.AnsiblePlayer, m runner, vars map[string]any) {
	t.Helper()
	absent := map[string]any{"flock_state": "absent", "flock_purge": true}
	for k, v := range vars {
		absent[k] = v
	}
	gone := []string{"/usr/local/bin/flockctl", "/usr/local/bin/flock-agent", "/usr/bin/flockctl", "/etc/flock",
		"/etc/systemd/system/flock.service", "/var/lib/flock/applied.json", "/srv/flock", roleKeyFile}
	t.Run("flock_state absent: check mode says what it would remove and removes nothing", func(t *testing.T) {
		before := vmSnapshot(t, m)
		r := p.Play(t, absent, "--check")
		r.MustSucceed(t)
		r.AssertTasks(t, map[string]string{
			"Say what deprovision would remove (check mode)": "changed",
			"Deprovision the flock":                          "skipping",
			"Remove flock_files and the spec":                "changed",
			"Remove the binaries and the package's copy":     "changed",
		})
		if !strings.Contains(r.Section("Say what deprovision would remove (check mode)"), "deprovision --all --yes --purge") {
			t.Errorf("check mode does not name the command it would run:\n%s", r.Out)
		}
		assertSame(t, before, vmSnapshot(t, m))
	})
	t.Run("flock_state absent removes the flock, the spec, the files and the programs", func(t *testing.T) {
		r := p.Play(t, absent)
		r.MustSucceed(t)
		r.AssertTasks(t, map[string]string{
			"Deprovision the flock":                      "changed",
			"Remove flock_files and the spec":            "changed",
			"Remove the binaries and the package's copy": "changed",
			"Remove the flock package":                   "skipping",
		})
		assertNoPaths(t, m, "flock_state absent left", gone...)
		if out := mustRun(t, m, "sh", "-c", "systemctl list-units --all --plain --no-legend 'flock*' | grep -v '^flock-harness-'; getent passwd | grep ^flock || true"); strings.TrimSpace(out) != "" {
			t.Errorf("flock_state absent left units or users:\n%s", out)
		}
	})
	t.Run("flock_state absent on a host without flock changes nothing", func(t *testing.T) {
		for _, args := range [][]string{nil, {"--check"}} {
			r := p.Play(t, absent, args...)
			r.MustSucceed(t)
			if r.Recap.Changed != 0 {
				t.Errorf("absent again %q: changed=%d, want 0\n%s", args, r.Recap.Changed, r.Out)
			}
		}
	})
}

// assertNoPaths fails t for each of paths that m has, saying what made
// or left it.
func assertNoPaths(t *testing.T, m runner, what string, paths ...string) {
	t.Helper()
	for _, path := range paths {
		if out, _, err := run(t, m, "ls", "-d", path); err == nil {
			t.Errorf("%s %s", what, out)
		}
	}
}

// vmAnsibleGVisor rolls out the example and an agent at level gvisor on
// the VM with the role: the controller's runsc (the harness's) is copied
// to the host, the VM's podman and crun are not fetched (it has no
// network), and the agent runs in gVisor: flockctl says so, runsc's
// sandbox runs in its unit as its uid, and it answers a task.
//
// Tier: as TestVMAnsible's, with runsc on the controller (LevelsTier).
func vmAnsibleGVisor(t *testing.T, v *harness.VM, p *harness.AnsiblePlayer) {
	t.Helper()
	runsc := harness.LevelsTier.Tool(t, "runsc")
	// The agent's root file system, as an operator would bring one:
	// busybox (the VM's busybox-static) and the mount points runsc wants.
	const rootfs = "/var/lib/flock-rootfs/busybox"
	mustRun(t, v, "sh", "-c", `set -e; r=`+rootfs+`
		mkdir -p $r/bin $r/etc $r/proc $r/dev $r/sys $r/tmp $r/run
		cp /bin/busybox $r/bin/busybox
		for a in sh tr cat; do ln -sf busybox $r/bin/$a; done
		echo root:x:0:0:root:/:/bin/sh > $r/etc/passwd`)
	s := exampleFlockSpec()
	s["agents"] = append(s["agents"].([]any), map[string]any{
		"id": 4, "level": "gvisor", "rootfs": rootfs, "command": []string{"/bin/sh", "-c", "tr a-z A-Z"}})
	vars := flockSpec(s)
	vars["flock_install"] = "binaries"
	vars["flock_runsc_bin"] = runsc

	r := p.Play(t, vars)
	r.MustSucceed(t)
	r.AssertTasks(t, map[string]string{
		"Check that the controller has runsc for the agents at level gvisor": "ok",
		"Install runsc for the agents at level gvisor":                       "changed",
		"Install the missing Debian packages":                                "skipping",
		"Provision the flock":                                                "changed",
	})
	b, err := os.ReadFile(runsc)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Fields(mustRun(t, v, "sha256sum", "/usr/local/bin/runsc")), fmt.Sprintf("%x", sha256.Sum256(b)); len(got) == 0 || got[0] != want {
		t.Errorf("the VM's /usr/local/bin/runsc: sha256 %q, want the controller's %s (%s)", got, want, runsc)
	}
	st := vmWaitActive(t, v, 3*time.Minute, 1, 2, 3, 4)
	var agent agentStatus
	for _, a := range st {
		if a.ID == 4 {
			agent = a
		}
	}
	if agent.Level != "gvisor" || agent.Label != "sandboxed (gVisor)" {
		t.Errorf("flockctl status of agent 4: level %q, label %q; want gvisor, sandboxed (gVisor)", agent.Level, agent.Label)
	}
	// gVisor's sandbox (its Sentry and gofer) runs in the agent's unit as
	// the agent's uid: the agent is in gVisor, not beside it.
	v.Eventually(t, time.Minute, func() error {
		out, _, err := run(t, v, "sh", "-c", "ps -e -o uid=,args=,cgroup= | grep -F 'flock-agent@4.service'")
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == strconv.FormatUint(uint64(agent.UID), 10) && strings.Contains(l, "runsc") {
				return nil
			}
		}
		return fmt.Errorf("no runsc process of uid %d in flock-agent@4.service (%v):\n%s", agent.UID, err, out)
	})
	if out := strings.TrimSpace(mustRun(t, v, "flockctl", "send", "--to", "4", "rolled out by ansible")); out != "ROLLED OUT BY ANSIBLE" {
		t.Errorf("agent 4 in gVisor answers %q, want ROLLED OUT BY ANSIBLE", out)
	}
}
