package test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/audit"
	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/explain"
	"github.com/flockrun/flock/test/harness"
	"github.com/flockrun/flock/wire"
)

// runAudit runs flockctl audit [ID] --output json; wantClean is whether
// it must exit 0.
func runAudit(t *testing.T, m *harness.Machine, wantClean bool, id ...string) audit.Report {
	t.Helper()
	argv := append(append([]string{"flockctl", "audit"}, id...), "--output", "json")
	t0 := time.Now()
	out, errOut, err := run(t, m, argv...)
	var r audit.Report
	if jerr := json.Unmarshal([]byte(out), &r); jerr != nil {
		t.Fatalf("%s: %v / %v\n%s\n%s", strings.Join(argv, " "), err, jerr, out, errOut)
	}
	if (err == nil) != wantClean || r.Failing() == wantClean {
		t.Errorf("%s: exit %v, failing %v; want clean %v\n%s", strings.Join(argv, " "), err, r.Failing(), wantClean, errOut)
	}
	t.Logf("%s took %v (flockctl says %.0f ms)", strings.Join(argv, " "), time.Since(t0).Round(time.Millisecond), r.Elapsed)
	for _, a := range r.Agents {
		for _, o := range a.Probes {
			if o.Failing() && wantClean {
				t.Errorf("agent %d (level %s): %s: %s (%s; control %s)", a.Agent, a.Level, o.Probe, o.Result, o.Detail, o.Control)
			}
		}
	}
	return r
}

// auditLevels: the audit of the levels flock is clean at all three
// levels, and finds the walls an operator weakens by hand.
func auditLevels(t *testing.T, m *harness.Machine) {
	r := runAudit(t, m, true)
	if len(r.Agents) != 6 || r.Probes < 6*40 {
		t.Errorf("audited %d agents, %d probes; want 6 agents, at least 40 probes each", len(r.Agents), r.Probes)
	}
	for _, a := range r.Agents {
		counts := map[audit.Result]int{}
		for _, o := range a.Probes {
			counts[o.Result]++
		}
		t.Logf("agent %d (level %s, peer %d): %v in %.0f ms; drift %v; error %q; the peer could not open %q", a.Agent, a.Level, a.Peer, counts, a.Elapsed, a.Drift, a.Error, a.PeerUnopened)
		if len(a.AsLive) > 0 { // a wall read back unlike it was set would be drift too
			t.Errorf("agent %d (level %s), as provisioned: walls in force differ from the plan: %v", a.Agent, a.Level, a.AsLive)
		}
		// The probe agents (odd) have a name in their egress: they flood
		// the proxy's handshakes, and the proxy refuses them over the
		// share; the workers cannot reach the proxy and do not.
		var hs *audit.Outcome
		for i, o := range a.Probes {
			if o.Probe == "hold more proxy handshakes than its share" {
				hs = &a.Probes[i]
			}
		}
		switch {
		case a.Agent%2 == 1 && (hs == nil || hs.Result != audit.Blocked || !strings.Contains(hs.Detail, fmt.Sprintf("agents[id=%d].shares.handshakes", a.Agent))):
			t.Errorf("agent %d (level %s, names in its egress): the proxy handshakes probe %+v; want it blocked by the proxy's 403 naming the share", a.Agent, a.Level, hs)
		case a.Agent%2 == 0 && hs != nil:
			t.Errorf("agent %d (level %s, no proxy): the proxy handshakes probe planned: %+v", a.Agent, a.Level, *hs)
		case hs != nil:
			t.Logf("agent %d (level %s): proxy handshakes %s: %s; control %s", a.Agent, a.Level, hs.Result, hs.Detail, hs.Control)
		}
		if a.Agent%2 == 1 { // one table per level
			for _, o := range a.Probes {
				t.Logf("  %-46s %-9s %-8s %s", o.Probe, o.Category, o.Result, clip(o.Detail+o.Known, 90))
			}
		}
	}

	// A weakened directory and a world-readable credential: drift on
	// both, and the audit fails.
	dir, cred := fmt.Sprintf("%s/2", agentsDir), "/var/lib/flock/creds/flock-2.nk"
	mustRun(t, m, "chmod", "0755", dir)
	mustRun(t, m, "chmod", "0444", cred)
	w := runAudit(t, m, false, "2")
	mustRun(t, m, "chmod", "0700", dir)
	mustRun(t, m, "chmod", "0400", cred)
	drifted := map[string]bool{}
	for _, a := range w.Agents {
		for _, d := range a.Drift {
			drifted[strings.Fields(d.What)[0]] = true
			t.Logf("weakened agent 2: drift %+v", d)
		}
	}
	if !drifted[dir] || !drifted[cred] {
		t.Errorf("agent 2's directory at 0755 and credential at 0444: drift on %v; want both", drifted)
	}

	unitStartedUnprotected(t, m, 2)
	busPermissionWidened(t, m, 2)

	// A hole in the firewall for agent 1's uid and its peer's (agent 2,
	// the colluder, whose replies the wall stops at their sender): agent
	// 1's loopback probes reach agent 2's ports and escape.
	holes := []string{strconv.Itoa(2000000000 + 1), strconv.Itoa(2000000000 + 2)}
	for _, uid := range holes {
		mustRun(t, m, "nft", "insert", "rule", "inet", "flock", "output", "meta", "skuid", uid, "accept")
	}
	w = runAudit(t, m, false, "1")
	out := mustRun(t, m, "nft", "-a", "list", "chain", "inet", "flock", "output")
	for _, line := range strings.Split(out, "\n") {
		for _, uid := range holes {
			if strings.Contains(line, "skuid "+uid+" accept") && strings.Contains(line, "# handle ") {
				h := strings.TrimSpace(line[strings.LastIndex(line, "# handle ")+len("# handle "):])
				mustRun(t, m, "nft", "delete", "rule", "inet", "flock", "output", "handle", h)
			}
		}
	}
	escaped := 0
	for _, a := range w.Agents {
		for _, o := range a.Probes {
			if o.Result == audit.Escaped && strings.Contains(o.Probe, "another agent's") {
				escaped++
				t.Logf("weakened firewall: agent %d: %s ESCAPED: %s", a.Agent, o.Probe, o.Detail)
			}
		}
	}
	if escaped == 0 || w.Drift == 0 {
		t.Errorf("agent 1's and 2's uids accepted by nft: %d escapes, %d drift; want both (escapes into agent 2's channels)", escaped, w.Drift)
	}
	// Restored: clean again, in the text form.
	out = mustRun(t, m, "flockctl", "audit", "1")
	if !strings.Contains(out, "audit clean: 1 agents") || !strings.Contains(out, "blocked") || strings.Contains(out, "ESCAPED") {
		t.Errorf("flockctl audit 1 after the firewall is restored:\n%s", out)
	}
}

// unitStartedUnprotected: agent id's unit replaced by one of the same
// name started by hand without ProtectSystem (the rest of its walls gone
// too); the audit names ProtectSystem, and provision, which restarts a
// unit whose Description lacks the planned hash, puts it back.
func unitStartedUnprotected(t *testing.T, m *harness.Machine, id int) {
	t0 := time.Now()
	name := unitName(id)
	mustRun(t, m, "systemctl", "stop", name)
	run(t, m, "systemctl", "reset-failed", name) // not failed: nothing to reset
	mustRun(t, m, "systemd-run", "--unit", name, "--uid", fmt.Sprintf("flock-%d", id),
		"--description", "started by hand, without ProtectSystem", "/bin/sleep", "infinity")
	if p := parseProps(mustRun(t, m, "systemctl", "show", "-p", "ProtectSystem", name)); p["ProtectSystem"] != "no" {
		t.Fatalf("%s started by hand: ProtectSystem=%q, want no", name, p["ProtectSystem"])
	}
	w := runAudit(t, m, false, strconv.Itoa(id))
	logWeakened(t, "unit without ProtectSystem", w)
	if d, ok := driftOn(w, "property", "ProtectSystem"); !ok || d.Want != "strict" {
		t.Errorf("agent %d's unit without ProtectSystem: drift on %v; want ProtectSystem strict -> no", id, driftNames(w))
	}
	// Its probes met the walls in force: the hand-made unit has neither
	// ProtectProc=invisible nor D-Bus among its InaccessiblePaths, which
	// the planned unit has (an audit of the plan would find no escape).
	a := w.Agents[0]
	escapes := map[string]bool{}
	for _, o := range a.Probes {
		if o.Result == audit.Escaped {
			escapes[o.Probe] = true
		}
	}
	if !slices.Contains(a.AsLive, "ProtectSystem") || !escapes["see the host's init in /proc"] || !escapes["connect to the system D-Bus"] {
		t.Errorf("agent %d's unit without its walls: probed as live %v, %d probes, escaped %v, unread %v, error %q; want ProtectSystem taken, and /proc and D-Bus escaped",
			id, a.AsLive, len(a.Probes), escapes, a.Unread, a.Error)
	}
	provision(t, m, levelsSpec())
	if p := parseProps(mustRun(t, m, "systemctl", "show", "-p", "ProtectSystem", name)); p["ProtectSystem"] != "strict" {
		t.Errorf("%s after provision: ProtectSystem=%q, want strict", name, p["ProtectSystem"])
	}
	t.Logf("unit started without ProtectSystem: caught and restored in %v", time.Since(t0).Round(time.Millisecond))
}

// busPermissionWidened: agent id may subscribe to everything in the
// bus's config, and the bus reloads it; the audit names the bus's
// subscribe permissions in force, and provision narrows them again.
func busPermissionWidened(t *testing.T, m *harness.Machine, id int) {
	t0 := time.Now()
	data, err := m.ReadFile(bus.ConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	var c bus.Config
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatalf("%s: %v", bus.ConfigPath, err)
	}
	widened := false
	for i, u := range c.Users {
		if u.Agent == id {
			c.Users[i].Subscribe = append(u.Subscribe, ">")
			widened = true
		}
	}
	if !widened {
		t.Fatalf("%s has no user for agent %d", bus.ConfigPath, id)
	}
	data, _ = json.Marshal(c)
	if err := m.WriteFile(bus.ConfigPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
	// As an operator would (ExecReload= sends SIGHUP); in force once the
	// bus answers with the wider list.
	mustRun(t, m, "systemctl", "reload", "flock.service")
	m.Eventually(t, 15*time.Second, func() error {
		var p wire.Permissions
		out := mustRun(t, m, "flockctl", "explain", strconv.Itoa(id), "--output", "json")
		var r explain.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			return err
		}
		if r.Bus != nil {
			p = *r.Bus
		}
		if !slices.Contains(p.Subscribe.Allow, ">") {
			return fmt.Errorf("the bus has agent %d subscribe %v", id, p.Subscribe.Allow)
		}
		return nil
	})
	w := runAudit(t, m, false, strconv.Itoa(id))
	logWeakened(t, "bus permission widened", w)
	if d, ok := driftOn(w, "bus", "subscribe"); !ok || !strings.HasSuffix(d.Have, " >") {
		t.Errorf("agent %d may subscribe to >: drift on %v; want bus subscribe", id, driftNames(w))
	}
	provision(t, m, levelsSpec())
	t.Logf("bus permission widened: caught and restored in %v", time.Since(t0).Round(time.Millisecond))
	// Both restored: clean again.
	runAudit(t, m, true, strconv.Itoa(id))
}

// logWeakened logs what the audit of a weakened agent found.
func logWeakened(t *testing.T, what string, r audit.Report) {
	t.Helper()
	for _, a := range r.Agents {
		for _, d := range a.Drift {
			t.Logf("%s: agent %d: drift %+v", what, a.Agent, d)
		}
		for _, o := range a.Probes {
			if o.Failing() {
				t.Logf("%s: agent %d: %s %s: %s", what, a.Agent, o.Probe, o.Result, o.Detail)
			}
		}
	}
}

func allDrift(r audit.Report) []explain.Drift {
	var out []explain.Drift
	for _, a := range r.Agents {
		out = append(out, a.Drift...)
	}
	return out
}

func driftNames(r audit.Report) []string {
	var out []string
	for _, d := range allDrift(r) {
		out = append(out, d.Kind+" "+d.What)
	}
	return out
}

// driftOn is r's drift of kind on what.
func driftOn(r audit.Report, kind, what string) (explain.Drift, bool) {
	for _, d := range allDrift(r) {
		if d.Kind == kind && d.What == what {
			return d, true
		}
	}
	return explain.Drift{}, false
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
