package test

// Tier: root + nspawn + ansible (TestCluster's flock). Splits of the
// three hosts' network, a bus killed in one, a host's power cut, while
// every host sends tasks; after each, the history of every send and every
// result is judged on every host (cutHistory).

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/test/harness"
)

// splitSender sends tasks to any worker, ids <prefix>-1, -2..., one after
// the other until /root/stop-<prefix> exists; every 4th is slow (its
// worker holds it half a second). An id the bus did not confirm is sent
// again (the same id is stored once), so every id below the last
// confirmed one was confirmed. Each confirmed send is a line "id start
// end" of /root/sent-<prefix>, each failed one "id start end error" of
// /root/refused-<prefix> (times in Unix seconds: the machines share the
// host's clock).
const splitSender = `p=$1; i=1
while [ ! -e /root/stop-$p ]; do
	case $((i % 4)) in 0) pl="slow $p-$i";; *) pl="$p-$i";; esac
	s=$(date +%s.%N)
	if out=$(flockctl send --to worker --no-wait --id "$p-$i" "$pl" 2>&1); then
		echo "$p-$i $s $(date +%s.%N)" >>/root/sent-$p; i=$((i+1)); sleep 0.2
	else
		echo "$p-$i $s $(date +%s.%N) $out" | tr '\n' ' ' >>/root/refused-$p; echo >>/root/refused-$p; sleep 0.5
	fi
done
touch /root/done-$p`

// sendLine is one line of a sender's files.
type sendLine struct {
	id         string
	start, end time.Time
	err        string
}

func readSendLines(b []byte) []sendLine {
	var out []sendLine
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, " ", 4)
		if len(f) < 3 {
			continue
		}
		sl := sendLine{id: f[0], start: unixTime(f[1]), end: unixTime(f[2])}
		if len(f) == 4 {
			sl.err = strings.TrimSpace(f[3])
		}
		out = append(out, sl)
	}
	return out
}

func unixTime(s string) time.Time {
	f, _ := strconv.ParseFloat(s, 64)
	return time.Unix(0, int64(f*1e9))
}

// startSplitSender starts splitSender on m as a transient unit of its own.
func startSplitSender(t *testing.T, m *harness.Machine, prefix string) {
	t.Helper()
	mustRun(t, m, "rm", "-f", "/root/sent-"+prefix, "/root/refused-"+prefix, "/root/stop-"+prefix, "/root/done-"+prefix)
	mustRun(t, m, "systemd-run", "--quiet", "--collect", "--unit", "split-sender-"+prefix, "sh", "-c", splitSender, "sh", prefix)
}

// senderLines is what the sender of prefix on m wrote so far.
func senderLines(t *testing.T, m *harness.Machine, prefix string) (sent, refused []sendLine) {
	t.Helper()
	s, _ := m.ReadFile("/root/sent-" + prefix)
	r, _ := m.ReadFile("/root/refused-" + prefix)
	return readSendLines(s), readSendLines(r)
}

// stopSplitSender stops it and returns what it wrote.
func stopSplitSender(t *testing.T, m *harness.Machine, prefix string) (sent, refused []sendLine) {
	t.Helper()
	mustRun(t, m, "touch", "/root/stop-"+prefix)
	m.Eventually(t, time.Minute, func() error {
		_, err := m.ReadFile("/root/done-" + prefix)
		return err
	})
	return senderLines(t, m, prefix)
}

// hostTasks is flockctl tasks on m.
func hostTasks(t *testing.T, m *harness.Machine) ([]operator.TaskEntry, error) {
	t.Helper()
	out, errOut, err := run(t, m, "flockctl", "tasks", "--limit", "100000", "--output", "json")
	if err != nil {
		return nil, fmt.Errorf("flockctl tasks on %s: %w: %s", m.Name(), err, errOut)
	}
	var es []operator.TaskEntry
	if err := json.Unmarshal([]byte(out), &es); err != nil {
		return nil, fmt.Errorf("flockctl tasks on %s: %w", m.Name(), err)
	}
	return es, nil
}

// splitCase is one fault: made, held while every sender sends, undone.
type splitCase struct {
	name    string
	senders []string         // the hosts that send meanwhile
	cut     func() error     // the fault
	heal    func() error     // its end
	during  func(*testing.T) // what else happens in the middle of it
	refuses string           // the host that must refuse tasks, saying why, meanwhile
	hold    time.Duration    // how long the fault lasts
}

// splits runs the faults on h's flock one after the other, judging the
// whole history on every host after each.
func splits(t *testing.T, h *harness.Hosts) {
	hist := newCutHistory(2, 3)
	// What the earlier subtests sent: done, each once (they checked).
	a := h.Machine("a")
	earlier, err := hostTasks(t, a)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range earlier {
		hist.stored(e.ID, 0)
	}
	cases := []splitCase{
		{name: "a from b and c, b's bus killed -9 in the middle", senders: []string{"a", "b", "c"}, refuses: "a", hold: 30 * time.Second,
			cut:    func() error { return h.Net.Split([]string{"a"}, []string{"b", "c"}) },
			heal:   h.Net.Heal,
			during: func(t *testing.T) { killBus(t, h.Machine("b")) }},
		{name: "b and c from each other, both reaching a", senders: []string{"a", "b", "c"}, hold: 20 * time.Second,
			cut:  func() error { return h.Net.Cut([2]string{"b", "c"}) },
			heal: h.Net.Heal},
		{name: "c from a and b", senders: []string{"a", "b", "c"}, refuses: "c", hold: 30 * time.Second,
			cut:  func() error { return h.Net.Split([]string{"c"}, []string{"a", "b"}) },
			heal: h.Net.Heal},
		{name: "c's power cut", senders: []string{"a", "b"}, hold: 15 * time.Second,
			cut:  func() error { return h.Machine("c").PowerOff() },
			heal: func() error { return h.Machine("c").PowerOn(t.Context()) }},
	}
	for k, sc := range cases {
		cut := k + 1
		if !t.Run(sc.name, func(t *testing.T) { splitOne(t, h, hist, cut, sc) }) {
			return // the flock is in no state for the next
		}
	}
}

// killBus kills m's bus with SIGKILL and logs when systemd has it back.
func killBus(t *testing.T, m *harness.Machine) {
	t.Helper()
	before := strings.TrimSpace(mustRun(t, m, "systemctl", "show", "-p", "InvocationID", "--value", "flock.service"))
	t0 := time.Now()
	mustRun(t, m, "systemctl", "kill", "--signal=SIGKILL", "flock.service")
	m.Eventually(t, time.Minute, func() error {
		p := parseProps(mustRun(t, m, "systemctl", "show", "-p", "InvocationID", "-p", "ActiveState", "flock.service"))
		if p["InvocationID"] == before || p["ActiveState"] != "active" {
			return fmt.Errorf("flock.service on %s: %v", m.Name(), p)
		}
		return nil
	})
	t.Logf("the bus on %s, killed with SIGKILL, was active again (a new invocation) %v later", m.Name(), time.Since(t0).Round(time.Millisecond))
}

// splitOne runs one fault and judges the history after it.
func splitOne(t *testing.T, h *harness.Hosts, hist *cutHistory, cut int, sc splitCase) {
	prefixes := map[string]string{}
	for _, host := range sc.senders {
		p := fmt.Sprintf("f%d%s", cut, host)
		prefixes[host] = p
		hist.sender(p)
		startSplitSender(t, h.Machine(host), p)
	}
	time.Sleep(3 * time.Second) // some stored before the fault
	tCut := time.Now()
	if err := sc.cut(); err != nil {
		t.Fatal(err)
	}
	// The host cut off: the first refusal that names the cause, and the
	// first that does so at once (the bus answered the send itself, not a
	// send that went unanswered first).
	var firstRefusal, firstClear *sendLine
	because := "host " + sc.refuses + " cannot store tasks now"
	for time.Since(tCut) < sc.hold {
		if sc.during != nil && time.Since(tCut) > sc.hold/2 {
			sc.during(t)
			sc.during = nil
		}
		if sc.refuses != "" && firstClear == nil {
			_, refused := senderLines(t, h.Machine(sc.refuses), prefixes[sc.refuses])
			for _, r := range refused {
				if !r.start.After(tCut) || !strings.Contains(r.err, because) {
					continue
				}
				if firstRefusal == nil {
					firstRefusal = &r
				}
				if r.end.Sub(r.start) < 2*time.Second {
					firstClear = &r
					break
				}
			}
		}
		time.Sleep(time.Second)
	}
	if sc.refuses != "" {
		minority := h.Machine(sc.refuses)
		if firstClear == nil {
			_, refused := senderLines(t, minority, prefixes[sc.refuses])
			t.Errorf("host %s, cut off, never refused a task at once saying why; its failed sends: %+v", sc.refuses, refused)
		} else {
			t.Logf("host %s: the first refusal naming the cause came to a send begun %v after the cut, in %v; the first at once %v after the cut, in %v: %s",
				sc.refuses, firstRefusal.start.Sub(tCut).Round(time.Millisecond), firstRefusal.end.Sub(firstRefusal.start).Round(time.Millisecond),
				firstClear.start.Sub(tCut).Round(time.Millisecond), firstClear.end.Sub(firstClear.start).Round(time.Millisecond), firstClear.err)
		}
		// Its status tells the truth: the other hosts' agents unknown
		// (so not well: exit 3), and that tasks sent there are refused.
		out, errOut, code, err := runStatus(t, minority)
		if err != nil || code != statusUnwell || !strings.Contains(out+errOut, "tasks sent on this host are refused") || !strings.Contains(out, "did not answer") {
			t.Errorf("status on %s, cut off (exit %d, %v):\n%s%s", sc.refuses, code, err, out, errOut)
		}
	}
	tHeal := time.Now()
	if err := sc.heal(); err != nil {
		t.Fatal(err)
	}
	// Every host's services and agents come back by themselves.
	for name, ids := range clusterAgents {
		clusterWaitUnits(t, h.Machine(name), 3*time.Minute, ids...)
	}
	back := time.Since(tHeal)
	var storesAgain time.Duration
	if sc.refuses != "" {
		m := h.Machine(sc.refuses)
		m.Eventually(t, 2*time.Minute, func() error {
			sent, _ := senderLines(t, m, prefixes[sc.refuses])
			for _, s := range sent {
				if s.start.After(tHeal) {
					storesAgain = s.end.Sub(tHeal)
					return nil
				}
			}
			return fmt.Errorf("host %s has stored no task since the heal", sc.refuses)
		})
	}
	time.Sleep(3 * time.Second) // sends after the heal
	var stored, refusals int
	for host, p := range prefixes {
		sent, refused := stopSplitSender(t, h.Machine(host), p)
		for _, s := range sent {
			hist.stored(s.id, cut)
		}
		stored += len(sent)
		refusals += len(refused)
	}
	// All of it done, as a sees it; then every host's view judged whole.
	var all time.Duration
	h.Machine("a").Eventually(t, 3*time.Minute, func() error {
		es, err := hostTasks(t, h.Machine("a"))
		if err != nil {
			return err
		}
		if bad := hist.check(es, true); len(bad) > 0 {
			return fmt.Errorf("%d problems, e.g. %s", len(bad), bad[0])
		}
		all = time.Since(tHeal)
		return nil
	})
	views := map[string][]operator.TaskEntry{}
	for _, name := range h.Names() {
		es, err := hostTasks(t, h.Machine(name))
		if err != nil {
			t.Fatal(err)
		}
		views[name] = es
	}
	bad := hist.checkHosts(views, true)
	for _, b := range bad {
		t.Error(b)
	}
	lost := len(bad)
	for _, name := range h.Names() {
		// status on each host: every agent active, on its host.
		rows := clusterStatus(t, h.Machine(name))
		for id := 1; id <= 4; id++ {
			if r := rows[id]; r.Host != clusterHostOf(id) || r.State != "active" {
				t.Errorf("status on %s after the heal: agent %d %+v", name, id, r)
			}
		}
	}
	again := ""
	if sc.refuses != "" {
		again = fmt.Sprintf(", host %s storing again after %v", sc.refuses, storesAgain.Round(time.Millisecond))
	}
	t.Logf("FIGURE fault %d (%s): held %v; %d tasks confirmed by senders on %v, %d sends failed and sent again; "+
		"services and agents back %v after the end%s, every task done once %v after it; %d problems",
		cut, sc.name, sc.hold, stored, sc.senders, refusals, back.Round(time.Millisecond), again, all.Round(time.Millisecond), lost)
}
