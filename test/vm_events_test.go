package test

// Tier: root + VM (qemu). flockctl events shows an OOM kill: nspawn does
// not enforce MemoryMax (docs/design.md, "Test tiers"), a VM's kernel does.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/events"
	"github.com/flockrun/flock/test/harness"
)

// oomSpec: agent 1 is a memory hog under a 64M limit (memHog,
// vm_limits_test.go), agent 2 its quiet neighbour.
const oomSpec = `agents:
  - id: 1
    exec: ["/usr/bin/python3", "` + hogDir + `/memhog.py"]
    limits: {memory: 64M}
  - id: 2
`

// TestVMEventsOOM: each OOM kill of the hog is one oom-killed event of
// agent 1, as many as the kernel's OOM reports for its cgroup, with no
// "failed" beside it and a restart between; its neighbour has none.
// Tier: root + VM (qemu).
func TestVMEventsOOM(t *testing.T) {
	v := harness.BootVM(t)
	mustRun(t, v, "mkdir", "-p", hogDir)
	if err := v.WriteFile(hogDir+"/memhog.py", []byte(memHog), 0o644); err != nil {
		t.Fatal(err)
	}
	vmProvision(t, v, oomSpec)
	var evs []events.Event
	// Killed, restarted and killed again: each kill is its own event.
	v.Eventually(t, 4*time.Minute, func() error {
		evs = eventsOf(t, v, "--since", "1h", "--agent", "1")
		if count(evs, events.OOMKilled, 1, "") < 2 || count(evs, events.Restarted, 1, "") < 1 {
			return fmt.Errorf("agent 1 not OOM-killed, restarted and killed again yet:\n%s", texts(evs))
		}
		return nil
	})
	// Stopped, so the counts hold still while they are compared.
	mustRun(t, v, "systemctl", "stop", unitName(1))
	// A VM's journal has the kernel's log: agent 2's uid refused once is
	// one event, from the kernel's line (the counters add nothing).
	out, _, _ := run(t, v, "setpriv", "--reuid=2000000002", "--regid=2000000002", "--clear-groups",
		probeBin, "attempt", `{"op":"connect-tcp","addr":"127.0.0.1:8222"}`)
	if !strings.Contains(out, "connection refused") {
		t.Fatalf("agent 2's connect to 127.0.0.1:8222: %s", out)
	}
	v.Eventually(t, 30*time.Second, func() error {
		evs = eventsOf(t, v, "--since", "1h")
		if n := count(evs, events.FirewallRefused, 0, ""); n != 1 {
			return fmt.Errorf("%d firewall-refused events, want 1:\n%s", n, texts(evs))
		}
		return nil
	})
	if n := count(evs, events.FirewallRefused, 2, "TCP to 127.0.0.1:8222 refused by table inet flock (kernel log"); n != 1 {
		t.Errorf("agent 2's refusal is not the kernel's line:\n%s", texts(evs))
	}
	kills := 0
	for _, l := range strings.Split(mustRun(t, v, "journalctl", "-k", "--no-pager", "-o", "cat"), "\n") {
		if m := oomKillRe.FindStringSubmatch(l); m != nil && strings.HasSuffix(m[1], "/"+unitName(1)) {
			kills++
		}
	}
	ooms := count(evs, events.OOMKilled, 1, "killed by the kernel's OOM killer")
	if ooms != kills || kills == 0 {
		t.Errorf("%d oom-killed events of agent 1, the kernel reports %d OOM kills in its cgroup; want as many, at least one:\n%s", ooms, kills, texts(evs))
	}
	if n := count(evs, events.Failed, 1, ""); n != 0 {
		t.Errorf("%d failed events of agent 1 beside its OOM kills, want none:\n%s", n, texts(evs))
	}
	if n := count(evs, events.OOMKilled, 2, ""); n != 0 {
		t.Errorf("agent 2 has %d oom-killed events", n)
	}
	if r := count(evs, events.Restarted, 1, ""); r < ooms-1 || r > ooms {
		t.Errorf("%d restarts of agent 1 after %d OOM kills", r, ooms)
	}
	t.Logf("FIGURE oom: %d OOM kills of agent 1 (kernel) = %d oom-killed events\nflockctl events --since 1h:\n%s", kills, ooms,
		mustRun(t, v, "flockctl", "events", "--since", "1h"))
	t.Logf("flockctl events --since 1h --agent 1 --output json:\n%s", mustRun(t, v, "flockctl", "events", "--since", "1h", "--agent", "1", "--output", "json"))
	if dir := capture; dir != "" {
		captureJournal(t, v, dir+"/vm-oom.jsonl")
	}
}
