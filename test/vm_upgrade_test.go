package test

// Tier: root + VM (qemu). The next package installed over a running flock
// with tasks queued, one held by its worker and more sent all along
// (TestVMPackage runs it on its VM, between install and purge).

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/test/harness"
)

// upgradeSpec is the example flock with a worker that holds a task
// starting "slow" for 15 s: long enough to still hold it when the
// upgrade restarts it.
const upgradeSpec = `defaults:
  limits: {memory: 256M, cpu: 50%, tasks: 50}
agents:
  - {id: 1, role: orchestrator, common: rw}
  - id: 2
    role: worker
    command: ["/bin/sh", "-c", "read x; case $x in slow*) sleep 15;; esac; echo \"$x\" | tr a-z A-Z"]
  - {id: 3, role: monitor, limits: {memory: 128M}}
`

// upgradeSender sends d-1, d-2... with --no-wait, one after the other,
// until /root/stop-sending exists; a send that failed (the bus
// restarting) is sent again with the same id. Every id the bus confirmed
// is a line of /root/sent; each refusal a line of /root/refused.
const upgradeSender = `i=1
while [ ! -e /root/stop-sending ]; do
	if out=$(flockctl send --no-wait --id d-$i "d-$i" 2>&1); then echo "d-$i" >>/root/sent; i=$((i+1))
	else echo "d-$i $out" >>/root/refused; sleep 0.2; fi
	sleep 0.3
done
echo done >/root/sender-done`

// unitLife is what says whether a unit ran on: its invocation, automatic
// restarts and main process.
type unitLife struct{ invocation, restarts, pid string }

func unitLives(t testing.TB, v *harness.VM, units ...string) map[string]unitLife {
	t.Helper()
	runs := map[string]unitLife{}
	for _, u := range units {
		p := vmProps(t, v, u, "InvocationID", "NRestarts", "MainPID")
		runs[u] = unitLife{p["InvocationID"], p["NRestarts"], p["MainPID"]}
	}
	return runs
}

// startsSince counts systemd's "Started" messages (the unit-started
// catalog entry) for unit since the VM's Unix time since.
func startsSince(t testing.TB, v *harness.VM, unit string, since int64) int {
	t.Helper()
	out := mustRun(t, v, "journalctl", "--since", "@"+strconv.FormatInt(since, 10), "-o", "cat", "--no-pager",
		"_PID=1", "UNIT="+unit, "MESSAGE_ID=39f53479d3a045ac8e11786248231fbf")
	if strings.TrimSpace(out) == "" {
		return 0
	}
	return len(strings.Split(strings.TrimSpace(out), "\n"))
}

// upgradeUnderLoad installs the next package (another version, every
// program another build) with dpkg -i over the flock of upgradeSpec while
// its worker holds a task, ten more are queued and a sender keeps
// sending, then provisions as the README says. It checks the history:
// every task the bus confirmed is done exactly once, none is there that
// nobody sent, the results of before are still there (the new bus read
// the old one's store); each agent and the bus started once, no
// automatic restart; status tells the truth before and after.
func upgradeUnderLoad(t *testing.T, v *harness.VM, oldDeb string) {
	next := harness.NextDeb(t)
	oldVersion, _ := harness.DebField(oldDeb, "Version")
	newVersion, err := harness.DebField(next, "Version")
	if err != nil {
		t.Fatal(err)
	}
	inVM := "/root/next.deb"
	b, err := os.ReadFile(next)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.WriteFile(inVM, b, 0o644); err != nil {
		t.Fatal(err)
	}
	vmProvision(t, v, upgradeSpec)
	vmWaitActive(t, v, 2*time.Minute, 1, 2, 3)

	// What was sent before (done: their subtests checked) and results
	// stored by the old bus, which the new one must still list.
	hist := newCutHistory(2)
	for _, e := range vmTasks(t, v) {
		hist.stored(e.ID, 0)
	}
	for _, id := range []string{"before-1", "before-2"} {
		if out := mustRun(t, v, "flockctl", "send", "--id", id, "--timeout", "2m", id); strings.TrimSpace(out) != strings.ToUpper(id) {
			t.Fatalf("send %s: %q", id, out)
		}
		hist.stored(id, 0)
		hist.results[id] = true
	}
	// The worker holds slow-1; q-1..q-10 queue behind it.
	mustRun(t, v, "flockctl", "send", "--no-wait", "--id", "slow-1", "slow-1")
	hist.stored("slow-1", 0)
	v.Eventually(t, time.Minute, func() error {
		for _, e := range vmTasks(t, v) {
			if e.ID == "slow-1" && e.State == operator.Running && e.Holder == 2 {
				return nil
			}
		}
		return fmt.Errorf("agent 2 does not hold slow-1 yet")
	})
	mustRun(t, v, "sh", "-c", `for i in $(seq 1 10); do flockctl send --no-wait --id q-$i q-$i >/dev/null || exit 1; done`)
	for i := 1; i <= 10; i++ {
		hist.stored(fmt.Sprintf("q-%d", i), 0)
	}
	mustRun(t, v, "sh", "-c", "rm -f /root/sent /root/refused /root/stop-sending /root/sender-done; setsid sh -c '"+
		strings.ReplaceAll(upgradeSender, "'", `'\''`)+"' </dev/null >/dev/null 2>&1 &")

	units := []string{"flock.service", unitName(1), unitName(2), unitName(3)}
	before := unitLives(t, v, units...)
	t0, err := strconv.ParseInt(strings.TrimSpace(mustRun(t, v, "date", "+%s")), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	mustRun(t, v, "dpkg", "-i", inVM)
	installed := time.Since(start)
	if out := mustRun(t, v, "flockctl", "version"); !strings.HasPrefix(out, "flockctl "+newVersion+" ") {
		t.Errorf("after dpkg -i: %q, want version %s", out, newVersion)
	}

	t.Run("between dpkg -i and provision, status says what runs the old programs", func(t *testing.T) {
		st, err := vmStatus(t, v)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range st {
			t.Logf("agent %d: %s, bus %s, drift %q", a.ID, a.State, a.Bus, a.Drift)
			if a.State != "active" || a.Bus != "connected" || !strings.Contains(a.Drift, "it runs flock-agent build ") {
				t.Errorf("agent %d: state %s, bus %s, drift %q; want active, connected, and a drift naming its old flock-agent", a.ID, a.State, a.Bus, a.Drift)
			}
		}
		if out := statusOut(t, v); !strings.Contains(out, "it runs flockctl build ") {
			t.Errorf("status does not say the bus runs the old flockctl:\n%s", out)
		}
		if after := unitLives(t, v, units...); !reflect.DeepEqual(after, before) {
			t.Errorf("dpkg -i alone restarted something: %v -> %v", before, after)
		}
	})

	start = time.Now()
	mustRun(t, v, "flockctl", "provision", "-f", specPath)
	provisioned := time.Since(start)
	// Back means active and on the new bus again: a unit is active a
	// moment before its agent has connected.
	var st []agentStatus
	v.Eventually(t, 2*time.Minute, func() error {
		var err error
		if st, err = vmStatus(t, v); err != nil {
			return err
		}
		if err := allActive(st, 1, 2, 3); err != nil {
			return err
		}
		for _, a := range st {
			if a.Bus != "connected" {
				return fmt.Errorf("agent %d: bus %s", a.ID, a.Bus)
			}
		}
		return nil
	})
	back := time.Since(start)
	// The sender goes on a while with the new bus, then stops.
	time.Sleep(5 * time.Second)
	mustRun(t, v, "touch", "/root/stop-sending")
	v.Eventually(t, time.Minute, func() error {
		_, err := v.ReadFile("/root/sender-done")
		return err
	})
	d, _ := v.ReadFile("/root/sent")
	during := strings.Fields(string(d))
	refused, _ := v.ReadFile("/root/refused")
	nRefused := 0
	if r := strings.TrimSpace(string(refused)); r != "" {
		nRefused = len(strings.Split(r, "\n"))
		t.Logf("sends refused while the bus restarted (each sent again):\n%s", r)
	}
	hist.sender("d")
	for _, id := range during {
		hist.stored(id, 1)
	}

	var entries []operator.TaskEntry
	v.Eventually(t, 3*time.Minute, func() error {
		entries = vmTasks(t, v)
		done := 0
		for _, e := range entries {
			if e.State == operator.Done {
				done++
			}
		}
		if done < len(hist.sent) {
			return fmt.Errorf("%d of %d tasks done", done, len(hist.sent))
		}
		return nil
	})
	bad := hist.check(entries, true)
	for _, b := range bad {
		t.Error(b)
	}
	after := unitLives(t, v, units...)
	for _, u := range units {
		n := startsSince(t, v, u, t0)
		if n != 1 || after[u].invocation == before[u].invocation || after[u].restarts != before[u].restarts {
			t.Errorf("%s: started %d times since the upgrade began (want 1), invocation %s -> %s, automatic restarts %s -> %s",
				u, n, before[u].invocation, after[u].invocation, before[u].restarts, after[u].restarts)
		}
		// The running program is the new one: dpkg replaced the file,
		// and a process of the old one shows it as deleted.
		if exe := mustRun(t, v, "readlink", "/proc/"+after[u].pid+"/exe"); strings.Contains(exe, "(deleted)") {
			t.Errorf("%s (pid %s) still runs the old program: %s", u, after[u].pid, exe)
		}
	}
	for _, a := range st {
		if a.Drift != "" || a.Bus != "connected" {
			t.Errorf("status after provision: agent %d drift %q bus %s", a.ID, a.Drift, a.Bus)
		}
	}
	t.Logf("FIGURE upgrade %s -> %s: dpkg -i %v, provision %v, every agent active and connected %v after provision began; "+
		"%d tasks sent (%d during the upgrade, %d sends refused and sent again), %d problems in the history, each agent and the bus started once",
		oldVersion, newVersion, installed.Round(time.Millisecond), provisioned.Round(time.Millisecond), back.Round(time.Millisecond),
		len(hist.sent), len(during), nRefused, len(bad))
	mustRun(t, v, "rm", "-f", inVM, "/root/sent", "/root/refused", "/root/stop-sending", "/root/sender-done")
}
