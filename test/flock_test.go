package test

// Helpers shared by the system tests: provisioning a spec inside a booted
// machine, reading flockctl's and systemd's view of it, and driving the
// probe agents through files in their own directories.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	probeop "github.com/flockrun/flock/audit/probe"
	"github.com/flockrun/flock/test/harness"
)

const (
	specPath  = "/root/flock.yaml"
	probeBin  = "/usr/local/bin/probe"
	agentsDir = "/srv/flock/agents"
	cmdWait   = 5 * time.Minute // bound on any one command (a VM emulates its CPU)
)

// runner is a booted machine or VM: argv runs there as root.
type runner interface {
	Run(ctx context.Context, argv ...string) (stdout, stderr string, err error)
}

// run runs argv in the machine or VM and returns its output and error,
// bounded.
func run(t testing.TB, m runner, argv ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdWait)
	defer cancel()
	return m.Run(ctx, argv...)
}

// mustRun runs argv and fails the test unless it exits 0.
func mustRun(t testing.TB, m runner, argv ...string) string {
	t.Helper()
	out, errOut, err := run(t, m, argv...)
	if err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(argv, " "), err, out, errOut)
	}
	return out
}

// writeSpec puts spec where provision reads it.
func writeSpec(t testing.TB, m *harness.Machine, spec string) {
	t.Helper()
	if err := m.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatalf("write spec: %v", err)
	}
}

// provision applies spec and fails the test if flockctl does not succeed.
func provision(t testing.TB, m *harness.Machine, spec string) {
	t.Helper()
	writeSpec(t, m, spec)
	mustRun(t, m, "flockctl", "provision", "-f", specPath)
}

// agentStatus is one row of `flockctl status --output json`.
type agentStatus struct {
	ID            int               `json:"id"`
	User          string            `json:"user"`
	UID           uint32            `json:"uid"`
	Unit          string            `json:"unit"`
	State         string            `json:"state"`
	Level         string            `json:"level"`
	Label         string            `json:"label"`
	Bus           string            `json:"bus"`
	LastHeartbeat *time.Time        `json:"last_heartbeat"`
	Violations    uint64            `json:"violations"`
	ByKind        map[string]uint64 `json:"violations_by_kind"`
	Drift         string            `json:"drift"`
	Refused       uint64            `json:"refused_packets"`
	RefusedLogged uint64            `json:"refused_logged"`
	Restarts      uint32            `json:"restarts"`
	LastExit      string            `json:"last_exit"`
	Diagnosis     *struct {
		Wall, Why, Fix string
	} `json:"diagnosis"`
	Proxy string `json:"proxy"`
}

// status is `flockctl status --output json` in the machine or VM, its
// agents well or not; the test fails if flockctl does (statusOf).
func status(t testing.TB, m runner) []agentStatus {
	t.Helper()
	return statusRows(t, statusOut(t, m, "--output", "json"))
}

// Exit codes of flockctl status (docs/operating.md, "Exit codes").
const (
	statusWell        = 0 // every agent shown is well
	statusUnwell      = 3 // one is not (yet, or any more)
	statusUnreachable = 4 // the flock could not be read: here, the bus did not answer
)

// runStatus runs flockctl status with args in m: what it printed and its
// exit code. err is set only when it failed as a verb (exit 1, or it did
// not run): a flock not well, or a bus that did not answer, is printed in
// full and said by the code alone.
func runStatus(t testing.TB, m runner, args ...string) (stdout, stderr string, code int, err error) {
	t.Helper()
	stdout, stderr, err = run(t, m, append([]string{"flockctl", "status"}, args...)...)
	var re *harness.RunError
	switch {
	case err == nil:
		return stdout, stderr, statusWell, nil
	case errors.As(err, &re) && (re.ExitCode == statusUnwell || re.ExitCode == statusUnreachable):
		return stdout, stderr, re.ExitCode, nil
	}
	return stdout, stderr, -1, fmt.Errorf("flockctl status %s: %w\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout, stderr)
}

// statusOf is runStatus; the test fails if flockctl status does. For
// polls while agents start or stop, and tests of agents not well.
func statusOf(t testing.TB, m runner, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	stdout, stderr, code, err := runStatus(t, m, args...)
	if err != nil {
		t.Fatal(err)
	}
	return stdout, stderr, code
}

// statusOut is statusOf's stdout: the table, or the JSON with args
// "--output", "json".
func statusOut(t testing.TB, m runner, args ...string) string {
	t.Helper()
	stdout, _, _ := statusOf(t, m, args...)
	return stdout
}

func statusRows(t testing.TB, out string) []agentStatus {
	t.Helper()
	var st []agentStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("flockctl status --output json: %v\n%s", err, out)
	}
	return st
}

// waitActive waits until flockctl reports exactly the agents ids, all active.
func waitActive(t testing.TB, m *harness.Machine, ids ...int) []agentStatus {
	t.Helper()
	var st []agentStatus
	m.Eventually(t, 30*time.Second, func() error {
		st = status(t, m)
		return allActive(st, ids...)
	})
	return st
}

// unitRun is what tells one run of a unit from the next.
type unitRun struct {
	ActiveEnter string // ActiveEnterTimestampMonotonic
	MainPID     string
}

func unitRunOf(t *testing.T, m *harness.Machine, id int) unitRun {
	t.Helper()
	out := mustRun(t, m, "systemctl", "show", "-p", "ActiveEnterTimestampMonotonic", "-p", "MainPID", unitName(id))
	p := parseProps(out)
	return unitRun{ActiveEnter: p["ActiveEnterTimestampMonotonic"], MainPID: p["MainPID"]}
}

func unitRuns(t *testing.T, m *harness.Machine, ids ...int) map[int]unitRun {
	t.Helper()
	r := map[int]unitRun{}
	for _, id := range ids {
		r[id] = unitRunOf(t, m, id)
	}
	return r
}

// unitProp reads one property of an agent's unit.
func unitProp(t *testing.T, m *harness.Machine, id int, prop string) string {
	t.Helper()
	return parseProps(mustRun(t, m, "systemctl", "show", "-p", prop, unitName(id)))[prop]
}

func parseProps(out string) map[string]string {
	p := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			p[k] = v
		}
	}
	return p
}

func unitName(id int) string { return "flock-agent@" + strconv.Itoa(id) + ".service" }

var exposureRe = regexp.MustCompile(`Overall exposure level for \S+: ([0-9]+(?:\.[0-9]+)?)`)

// exposure is systemd-analyze security's overall score of an agent's unit.
func exposure(t *testing.T, m *harness.Machine, id int) float64 {
	t.Helper()
	return unitExposure(t, m, unitName(id))
}

func unitExposure(t *testing.T, m *harness.Machine, unit string) float64 {
	t.Helper()
	// systemd-analyze exits non-zero only with --threshold; parse either way.
	out, errOut, err := run(t, m, "systemd-analyze", "security", "--no-pager", unit)
	mm := exposureRe.FindStringSubmatch(out + errOut)
	if mm == nil {
		t.Fatalf("systemd-analyze security %s: no overall exposure (err %v)\n%s\n%s", unit, err, out, errOut)
	}
	v, _ := strconv.ParseFloat(mm[1], 64)
	return v
}

// hostSnapshot is everything a bad spec must leave untouched.
func hostSnapshot(t *testing.T, m *harness.Machine) map[string]string {
	t.Helper()
	snap := map[string]string{}
	for name, argv := range map[string][]string{
		"passwd":   {"cat", "/etc/passwd"},
		"group":    {"cat", "/etc/group"},
		"sysusers": {"ls", "-la", "/etc/sysusers.d"},
		"units":    {"systemctl", "list-units", "flock-agent@*", "--all", "--no-legend", "--plain"},
		"nft":      {"nft", "list", "ruleset"},
		"srv":      {"ls", "-laR", "--time-style=full-iso", "/srv"},
		"bus":      {"sh", "-c", "cat /etc/flock/bus.json /etc/systemd/system/flock.service; systemctl show -p ActiveState -p MainPID flock.service"},
		"creds":    {"ls", "-laR", "--time-style=full-iso", "/var/lib/flock"},
	} {
		out, errOut, err := run(t, m, argv...)
		if name == "nft" {
			out = withoutDynamicState(out)
		}
		snap[name] = fmt.Sprintf("%s\n%s\nerr=%v", out, errOut, err)
	}
	return snap
}

// dynamicElements are the elements of the table's dynamic sets: each
// agent's rate buckets, counts and log limit as its packets filled them,
// with their expiry times. They change with traffic and time, not with a
// provision.
var dynamicElements = regexp.MustCompile(`(flags dynamic[^\n]*\n(?:\t+timeout [^\n]*\n)?)\t+elements = \{[^}]*\}\n`)

// withoutDynamicState is an nft listing without what the kernel keeps in
// the dynamic sets: what a provision (or a reboot) must leave as it was.
func withoutDynamicState(listing string) string {
	return dynamicElements.ReplaceAllString(listing, "$1")
}

// assertNothingLeft checks that no trace of flock remains on the machine.
func assertNothingLeft(t *testing.T, m *harness.Machine) {
	t.Helper()
	for _, db := range []string{"passwd", "group"} {
		out, _, _ := run(t, m, "getent", db)
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "flock") {
				t.Errorf("getent %s still has %q", db, l)
			}
		}
	}
	if out, _, _ := run(t, m, "systemctl", "list-units", "flock-agent@*", "--all", "--no-legend", "--plain"); strings.TrimSpace(out) != "" {
		t.Errorf("units left:\n%s", out)
	}
	for _, p := range []string{"/etc/sysusers.d/flock.conf", "/etc/sysusers.d/flock-bus.conf", "/etc/sysusers.d/flock-readers.conf", "/srv/flock", "/etc/flock/bus.json", "/etc/systemd/system/flock.service", "/var/lib/flock",
		"/var/lib/flock-bus", "/var/lib/private/flock-bus",
		"/etc/systemd/system/flock-counters.socket", "/etc/systemd/system/flock-counters@.service", "/run/flock-counters.sock"} {
		if _, _, err := run(t, m, "test", "!", "-e", p); err != nil {
			t.Errorf("%s still exists", p)
		}
	}
	for _, u := range []string{"flock.service", "flock-counters.socket"} {
		if st := strings.TrimSpace(mustRun(t, m, "systemctl", "show", "-p", "ActiveState", "--value", u)); st != "inactive" {
			t.Errorf("%s is %s", u, st)
		}
	}
	if out, _, err := run(t, m, "nft", "list", "table", "inet", "flock"); err == nil {
		t.Errorf("table inet flock still exists:\n%s", out)
	}
	// No process may outlive its agent: uids from the agent range.
	out := mustRun(t, m, "ps", "-eo", "uid=,pid=,comm=")
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 3 {
			if uid, _ := strconv.ParseUint(f[0], 10, 32); uid >= 2000000000 {
				t.Errorf("agent process left: %s", l)
			}
		}
	}
}

// probe drives one `probe serve` agent through its directory.
type probe struct {
	m   *harness.Machine
	id  int
	pid int // of the probe inside its unit; agents share the PID namespace
}

var probeSeq atomic.Int64

// startedProbe waits until agent id's probe is up and returns it.
func startedProbe(t *testing.T, m *harness.Machine, id int) *probe {
	t.Helper()
	ready := path.Join(agentsDir, strconv.Itoa(id), "probe", "ready")
	var info struct{ PID int }
	// A ceiling, not a timing: a gVisor probe's first start has taken over
	// 30 s with the vm tier running beside this one.
	err := harness.Within(2*time.Minute, func() error {
		b, err := m.ReadFile(ready)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &info)
	})
	if err != nil {
		unit := fmt.Sprintf("flock-agent@%d", id)
		st, _, _ := m.Run(t.Context(), "systemctl", "status", "--no-pager", unit)
		log, _, _ := m.Run(t.Context(), "journalctl", "-u", unit, "-n", "40", "--no-pager", "-o", "short-monotonic")
		t.Logf("%s\n%s", st, log)
		// The unit's own last lines first: the end of a run shows this
		// message's first lines alone.
		last, _, _ := m.Run(t.Context(), "journalctl", "-u", unit, "-n", "5", "--no-pager", "-o", "cat", "SYSLOG_IDENTIFIER=flock-agent")
		t.Fatalf("agent %d's probe never said it was ready: %v; its unit's last words:\n%s", id, err, last)
	}
	return &probe{m: m, id: id, pid: info.PID}
}

// probeResult is what the probe reports for one request: the probe's own
// type, so the two ends of the file it answers in read it the same way.
type probeResult = probeop.Result

// do has the agent run req from inside its unit and returns the result.
// Requests are written beside the inbox and renamed in, so the probe never
// reads half a request.
func (p *probe) do(t *testing.T, req map[string]any) probeResult {
	t.Helper()
	name := p.send(t, req)
	base := path.Join(agentsDir, strconv.Itoa(p.id), "probe")
	var r probeResult
	p.m.Eventually(t, 10*time.Second, func() error {
		b, err := p.m.ReadFile(path.Join(base, "out", name+".json"))
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &r)
	})
	return r
}

// send hands the agent req and returns its name, without waiting for its
// answer (for a request in the background, whose answer comes when it
// ends).
func (p *probe) send(t *testing.T, req map[string]any) string {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%06d", probeSeq.Add(1))
	base := path.Join(agentsDir, strconv.Itoa(p.id), "probe")
	tmp := path.Join(base, "in", name+".tmp")
	if err := p.m.WriteFile(tmp, body, 0o644); err != nil {
		t.Fatalf("agent %d request %s: %v", p.id, body, err)
	}
	mustRun(t, p.m, "mv", tmp, path.Join(base, "in", name+".json"))
	return name
}

// asRootInside runs the same request as root from outside the unit, in the
// mount and IPC namespaces of process pid (an agent's), without its user,
// seccomp, Landlock or firewall: the positive control that shows a refused
// attempt was refused by the isolation and not by a broken probe.
func asRootInside(t *testing.T, m *harness.Machine, pid int, req map[string]any) probeResult {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, err := run(t, m, "nsenter", "-t", strconv.Itoa(pid), "-m", "-i", "--", probeBin, "attempt", string(body))
	var r probeResult
	if jerr := json.Unmarshal([]byte(out), &r); jerr != nil {
		t.Fatalf("root control %s: %v (%v)\n%s\n%s", body, errors.Join(err, jerr), err, out, errOut)
	}
	return r
}
