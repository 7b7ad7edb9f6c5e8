package test

// Tier: root + nspawn. The operator's other verbs on a booted systemd
// machine: --dry-run, --agents, status, logs, deprovision -f, and the one
// sentence a host that cannot be changed gets; explain ID from the live
// host; the read-only verbs run by a member of flock-readers.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/explain"
	"github.com/flockrun/flock/test/harness"
)

func TestOperatorVerbs(t *testing.T) {
	// Tier: root + nspawn.
	m := harness.Boot(t)

	t.Run("refused without root or systemd, nothing changed", func(t *testing.T) {
		writeSpec(t, m, threeAgents)
		before := hostSnapshot(t, m)
		for _, tc := range []struct {
			name, want string
			argv       []string
		}{
			{"not root", "flockctl must run as root", []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "flockctl", "provision", "-f", specPath}},
			// /run/systemd/system hidden: the check systemd itself documents
			// (sd_booted) says no systemd.
			{"no systemd", "no systemd to talk to", []string{"unshare", "-m", "sh", "-c", "mount -t tmpfs none /run/systemd && exec flockctl provision -f " + specPath}},
		} {
			_, errOut, err := run(t, m, tc.argv...)
			if err == nil {
				t.Errorf("%s: flockctl succeeded", tc.name)
			}
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Errorf("%s: stderr %q, want one line containing %q", tc.name, errOut, tc.want)
			}
		}
		assertSameHost(t, before, hostSnapshot(t, m))
	})

	t.Run("dry-run prints the plan and changes nothing", func(t *testing.T) {
		before := hostSnapshot(t, m)
		out := mustRun(t, m, "flockctl", "provision", "-f", specPath, "--dry-run")
		for _, want := range []string{"create user      flock-3 (uid 2000000003)", "start unit       flock-agent@3.service", "replace firewall inet flock"} {
			if !strings.Contains(out, want) {
				t.Errorf("dry-run plan lacks %q:\n%s", want, out)
			}
		}
		assertSameHost(t, before, hostSnapshot(t, m))
	})

	t.Run("--agents N provisions ids 1..N, two at once are serialised", func(t *testing.T) {
		out := mustRun(t, m, "sh", "-c", "flockctl provision --agents 4 & a=$!; flockctl provision --agents 4 & b=$!; wait $a && wait $b")
		waitActive(t, m, 1, 2, 3, 4)
		if n := strings.Count(out, "start unit       flock-agent@4.service"); n != 1 {
			t.Errorf("agent 4 was started %d times by the two runs, want once:\n%s", n, out)
		}
		if again := mustRun(t, m, "flockctl", "provision", "--agents", "4"); !strings.Contains(again, "nothing to do") {
			t.Errorf("not converged after two runs at once:\n%s", again)
		}
	})

	t.Run("status json keeps its contract", func(t *testing.T) {
		out := statusOut(t, m, "--output", "json")
		var rows []map[string]any
		if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 4 {
			t.Fatalf("status json: %v, %d rows\n%s", err, len(rows), out)
		}
		for _, key := range []string{"id", "user", "uid", "unit", "state", "level", "label"} {
			if _, ok := rows[3][key]; !ok {
				t.Errorf("status json row lacks %q: %v", key, rows[3])
			}
		}
		if id, ok := rows[3]["id"].(float64); !ok || id != 4 {
			t.Errorf("id %v is not the number 4", rows[3]["id"])
		}
		if rows[3]["label"] != "process isolation with guardrails" || rows[3]["state"] != "active" {
			t.Errorf("row 4: %v", rows[3])
		}
		table := statusOut(t, m)
		if !strings.Contains(table, "flock-agent@4.service  active/running") {
			t.Errorf("status table:\n%s", table)
		}
	})

	t.Run("explain ID reads the live host and names drift", func(t *testing.T) {
		t0 := time.Now()
		text := mustRun(t, m, "flockctl", "explain", "2")
		t.Logf("flockctl explain 2:\n%s", text)
		for _, want := range []string{
			"state: active/running", "ProtectSystem=strict", "UMask=0077", "User=flock-2", // the unit as systemd has it
			`meta skuid @agents ip daddr 127.0.0.1 tcp dport 4222 accept comment "bus"`, // its uid's rules
			"directory 0700 flock-2:flock-2",                                            // its paths
			"publish:   allow ",                                                         // the running bus's permissions
			"none: the host is as planned",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("explain 2 lacks %q:\n%s", want, text)
			}
		}
		live := func() explain.Report {
			t.Helper()
			var r explain.Report
			out := mustRun(t, m, "flockctl", "explain", "2", "--output", "json")
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("explain json: %v\n%s", err, out)
			}
			return r
		}
		r := live()
		if r.Exposure.Score == nil || *r.Exposure.Score <= 0 || *r.Exposure.Score >= 10 {
			t.Errorf("exposure %+v, want systemd-analyze's number", r.Exposure)
		}
		if !slices.Contains(r.Paths, explain.Path{Path: "/srv/flock/agents/2", Present: true, Type: "directory", Mode: "0700",
			UID: 2000000002, GID: 2000000002, Owner: "flock-2:flock-2"}) {
			t.Errorf("paths %+v lack agent 2's directory, 0700", r.Paths)
		}
		if r.Bus == nil || !slices.Contains(r.Bus.Publish.Allow, "agent.2.>") {
			t.Errorf("bus permissions %+v lack agent.2.>", r.Bus)
		}
		// Its rules: the connect and send rates, the bus, and the three of
		// the deny (count and log, reset, the rest).
		if len(r.Drift) != 0 || len(r.Unread) != 0 || len(r.Firewall) != 6 {
			t.Errorf("a fresh flock: drift %+v, unread %v, bus %v, rules %q", r.Drift, r.Unread, r.Bus, r.Firewall)
		}
		mustRun(t, m, "chmod", "0755", "/srv/flock/agents/2")
		defer mustRun(t, m, "chmod", "0700", "/srv/flock/agents/2")
		want := explain.Drift{Kind: "path", What: "/srv/flock/agents/2 mode", Want: "0700", Have: "0755"}
		if r := live(); len(r.Drift) != 1 || r.Drift[0] != want {
			t.Errorf("after chmod 0755: drift %+v, want %+v", r.Drift, want)
		}
		mustRun(t, m, "chmod", "0700", "/srv/flock/agents/2")
		// An accept rule for its uid added by hand: not planned.
		added := "meta skuid 2000000002 ip daddr 127.0.0.1 tcp dport 8222 accept"
		echo := mustRun(t, m, "nft", "--echo", "--handle", "insert", "rule", "inet", "flock", "output", added)
		_, handle, ok := strings.Cut(strings.TrimSpace(echo), "# handle ")
		if !ok {
			t.Fatalf("nft --echo printed no handle: %q", echo)
		}
		want = explain.Drift{Kind: "firewall", What: added, Have: added}
		if r := live(); len(r.Drift) != 1 || r.Drift[0] != want {
			t.Errorf("after a rule added by hand: drift %+v, want %+v", r.Drift, want)
		}
		mustRun(t, m, "nft", "delete", "rule", "inet", "flock", "output", "handle", handle)
		if r := live(); len(r.Drift) != 0 {
			t.Errorf("restored: drift %+v", r.Drift)
		}
		if _, errOut, err := run(t, m, "flockctl", "explain", "9"); err == nil || !strings.Contains(errOut, "no such agent in the provisioned flock") {
			t.Errorf("explain of an unknown agent: %v %s", err, errOut)
		}
		t.Logf("took %v", time.Since(t0).Round(time.Millisecond))
	})

	t.Run("logs shows the journal and the log file", func(t *testing.T) {
		var out string
		m.Eventually(t, 10*time.Second, func() error {
			out = mustRun(t, m, "flockctl", "logs", "2")
			if n := strings.Count(out, `"msg":"agent started","agent":2`); n < 2 {
				return fmt.Errorf("agent 2's start line appears %d times, want journal and file:\n%s", n, out)
			}
			return nil
		})
		for _, want := range []string{"==> journal of flock-agent@2.service <==", "==> /srv/flock/logs/2.log <=="} {
			if !strings.Contains(out, want) {
				t.Errorf("logs lack %q:\n%s", want, out)
			}
		}
		// -f follows until stopped.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		follow, _, _ := m.Run(ctx, "timeout", "2", "flockctl", "logs", "2", "-f")
		if !strings.Contains(follow, `"agent":2`) {
			t.Errorf("logs -f printed:\n%s", follow)
		}
		if _, errOut, err := run(t, m, "flockctl", "logs", "9"); err == nil || !strings.Contains(errOut, "agent 9 is not in the provisioned flock") {
			t.Errorf("logs of an unknown agent: %v %s", err, errOut)
		}
	})

	t.Run("flock-readers read without root and change nothing; others are told how to join", func(t *testing.T) {
		// Agent 4 takes tasks, so send gets as far as the bus.
		writeSpec(t, m, "agents: [{id: 1}, {id: 2}, {id: 3}, {id: 4, role: worker, command: [cat]}]\n")
		mustRun(t, m, "flockctl", "provision", "-f", specPath)
		waitActive(t, m, 1, 2, 3, 4)
		for _, u := range [][]string{{"reader", "--groups", "flock-readers"}, {"outsider"}} {
			mustRun(t, m, append([]string{"useradd", "--no-create-home", "--shell", "/usr/sbin/nologin"}, u...)...)
			defer mustRun(t, m, "userdel", u[0])
		}
		as := func(user string, argv ...string) []string {
			return append([]string{"runuser", "-u", user, "--", "flockctl"}, argv...)
		}
		before := hostSnapshot(t, m)
		tasksBefore := mustRun(t, m, "flockctl", "tasks", "--output", "json")

		for _, tc := range []struct {
			argv         []string
			out, note    string // stdout holds out; stderr holds note once
			unreadByRoot bool   // explain's JSON names the firewall among what it did not read
		}{
			{[]string{"status"}, "flock-agent@4.service  active/running", "drift and the firewall's refusals not checked: needs root", false},
			{[]string{"usage"}, "no agent is granted a model API", "", false},
			{[]string{"tasks"}, "", "", false},
			{[]string{"events", "--since", "1h"}, "", "the firewall's refusal counts not read: needs root", false},
			{[]string{"explain", "2"}, "User=flock-2", "", false},
			{[]string{"explain", "2", "--output", "json"}, `"agent": 2`, "", true},
		} {
			out, errOut, err := run(t, m, as("reader", tc.argv...)...)
			if err != nil {
				t.Errorf("a reader's flockctl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(tc.argv, " "), err, out, errOut)
				continue
			}
			if !strings.Contains(out, tc.out) {
				t.Errorf("a reader's flockctl %s lacks %q:\n%s", strings.Join(tc.argv, " "), tc.out, out)
			}
			if tc.note != "" && strings.Count(errOut, tc.note) != 1 {
				t.Errorf("a reader's flockctl %s: stderr %q, want %q once", strings.Join(tc.argv, " "), errOut, tc.note)
			}
			if tc.unreadByRoot {
				var r explain.Report
				if err := json.Unmarshal([]byte(out), &r); err != nil {
					t.Fatalf("explain json: %v\n%s", err, out)
				}
				if !slices.Contains(r.Unread, "table inet flock: needs root") || r.Bus == nil || len(r.Paths) == 0 {
					t.Errorf("a reader's explain: unread %q, bus %v, paths %v; want the firewall unread, the rest read", r.Unread, r.Bus, r.Paths)
				}
			}
			// One who is neither root nor a reader gets one sentence.
			_, errOut, err = run(t, m, as("outsider", tc.argv...)...)
			const join = "add yourself to flock-readers (sudo usermod -aG flock-readers $USER, then log in again) or use sudo"
			if lines := strings.Split(strings.TrimSpace(errOut), "\n"); err == nil || len(lines) != 1 || !strings.Contains(lines[0], join) {
				t.Errorf("an outsider's flockctl %s: %v, stderr %q; want one line saying %q", strings.Join(tc.argv, " "), err, errOut, join)
			}
		}

		// What the group reads, and what it does not.
		mustRun(t, m, "runuser", "-u", "reader", "--", "cat", "/var/lib/flock/applied.json", "/var/lib/flock/creds/reader.nk")
		for _, secret := range []string{"/var/lib/flock/creds/operator.nk", "/var/lib/flock/creds/flock-2.nk"} {
			if _, _, err := run(t, m, "runuser", "-u", "reader", "--", "cat", secret); err == nil {
				t.Errorf("a reader reads %s", secret)
			}
		}
		if _, _, err := run(t, m, "runuser", "-u", "reader", "--", "ls", "/var/lib/flock/creds"); err == nil {
			t.Error("a reader lists the credentials")
		}
		// A reader changes nothing.
		for _, argv := range [][]string{{"send", "--to", "4", "--no-wait", "hello"}, {"provision", "-f", specPath}, {"deprovision", "--all"}} {
			if out, errOut, err := run(t, m, as("reader", argv...)...); err == nil {
				t.Errorf("a reader's flockctl %s succeeded:\n%s", strings.Join(argv, " "), out)
			} else if !strings.Contains(errOut, "root") {
				t.Errorf("a reader's flockctl %s: stderr %q, want it to say root's", strings.Join(argv, " "), errOut)
			}
		}
		assertSameHost(t, before, hostSnapshot(t, m))
		if after := mustRun(t, m, "flockctl", "tasks", "--output", "json"); after != tasksBefore {
			t.Errorf("the tasks changed under a reader:\nbefore %s\nafter %s", tasksBefore, after)
		}
	})

	t.Run("deprovision -f removes only the agents it names", func(t *testing.T) {
		writeSpec(t, m, "agents: [{id: 3}, {id: 4}]\n")
		// --dry-run shows what would go and exits 2; without a terminal
		// to ask on (stdin here is empty) and without --yes it refuses.
		out, errOut, err := run(t, m, "flockctl", "deprovision", "--dry-run", "-f", specPath)
		var re *harness.RunError
		if !errors.As(err, &re) || re.ExitCode != 2 || !strings.Contains(out, "agents 3-4: their units, users and groups") {
			t.Errorf("deprovision --dry-run: %v, want exit 2 naming agents 3-4\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
		}
		if out, errOut, err := run(t, m, "flockctl", "deprovision", "-f", specPath); err == nil || out != "" || !strings.Contains(errOut, "pass --yes") {
			t.Errorf("deprovision without a terminal or --yes: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
		}
		waitActive(t, m, 1, 2, 3, 4)
		mustRun(t, m, "flockctl", "deprovision", "--yes", "-f", specPath)
		waitActive(t, m, 1, 2)
		for _, user := range []string{"flock-3", "flock-4"} {
			if out, _, err := run(t, m, "getent", "passwd", user); err == nil {
				t.Errorf("user %s still exists: %s", user, out)
			}
		}
		// Kept without --purge.
		mustRun(t, m, "test", "-d", "/srv/flock/agents/3")
		mustRun(t, m, "flockctl", "deprovision", "--yes", "--all", "--purge")
		assertNothingLeft(t, m)
	})
}

func assertSameHost(t *testing.T, before, after map[string]string) {
	t.Helper()
	for k := range before {
		if before[k] != after[k] {
			t.Errorf("the host's %s changed:\nbefore:\n%s\nafter:\n%s", k, before[k], after[k])
		}
	}
}
