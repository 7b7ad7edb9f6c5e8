package test

// Tier: root + nspawn. A task handed to the flock gets exactly one final
// result whatever crashes: its worker killed mid-task, the bus restarted
// while tasks flow, the whole machine rebooted with tasks queued.

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/test/harness"
)

// durableSpec: four workers whose task takes a moment, so a kill lands
// mid-task; deliveries generous enough that no task is dead-lettered by
// the kills alone.
const durableSpec = `bus: {max_deliveries: 50}
defaults:
  heartbeat: 1s
  command: ["/bin/sh", "-c", "read x; sleep 0.5; echo \"done $x\""]
agents: {count: 4}
`

// killedWorkers is how many workers TestKilledWorkersLoseNoTask kills in
// turn. systemd 252 (Debian 12) restarts a failed agent after a fixed 5 s
// (units.restartPolicy), so 100 kills cost 500 s of restarts shared among
// the workers: with 10, about 50 s.
const killedWorkers = 10

type taskEntry struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Agent int    `json:"agent"`
	OK    *bool  `json:"ok"`
	Error string `json:"error"`
}

// sendAll queues one task per id, retrying a send the bus refused (it may
// be restarting); it returns the ids the bus accepted.
func sendAll(t *testing.T, m *harness.Machine, ids []string, retry bool) []string {
	t.Helper()
	var accepted []string
	for _, id := range ids {
		for try := 0; ; try++ {
			_, stderr, err := run(t, m, "flockctl", "send", "--id", id, "--no-wait", "payload "+id)
			if err == nil {
				accepted = append(accepted, id)
				break
			}
			if !retry || try > 50 {
				t.Fatalf("send %s: %v\n%s", id, err, stderr)
			}
			time.Sleep(100 * time.Millisecond) // the bus is restarting: try again
		}
	}
	return accepted
}

// waitAllDone waits until every id has exactly one result, nothing is
// pending or running, and returns the results by id.
func waitAllDone(t *testing.T, m *harness.Machine, ids []string, timeout time.Duration) map[string]taskEntry {
	t.Helper()
	var done map[string]taskEntry
	m.Eventually(t, timeout, func() error {
		out, stderr, err := run(t, m, "flockctl", "tasks", "--limit", "100000", "--output", "json")
		if err != nil {
			return fmt.Errorf("flockctl tasks: %v %s", err, stderr)
		}
		var entries []taskEntry
		if err := json.Unmarshal([]byte(out), &entries); err != nil {
			return err
		}
		done = map[string]taskEntry{}
		open := 0
		for _, e := range entries {
			switch e.State {
			case "done":
				if _, twice := done[e.ID]; twice {
					t.Fatalf("task %s has two results", e.ID)
				}
				done[e.ID] = e
			case "dead":
				t.Fatalf("task %s was dead-lettered: %+v", e.ID, e)
			default:
				open++
			}
		}
		for _, id := range ids {
			if _, ok := done[id]; !ok {
				return fmt.Errorf("%d of %d tasks done, %d pending or running (e.g. %s not done)", len(done), len(ids), open, id)
			}
		}
		return nil
	})
	for _, id := range ids {
		if e := done[id]; e.OK == nil || !*e.OK {
			t.Errorf("task %s failed: %+v", id, e)
		}
	}
	return done
}

// pendingTasks counts the tasks waiting for a worker. A task a killed
// worker held shows running until its lease ends, and feeds no one.
func pendingTasks(t *testing.T, m *harness.Machine) int {
	t.Helper()
	var entries []taskEntry
	if err := json.Unmarshal([]byte(mustRun(t, m, "flockctl", "tasks", "--limit", "1", "--output", "json")), &entries); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.State == "pending" {
			n++
		}
	}
	return n
}

func taskIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return ids
}

func TestKilledWorkersLoseNoTask(t *testing.T) {
	// Tier: root + nspawn.
	m := harness.Boot(t)
	provision(t, m, strings.Replace(durableSpec, "count: 4", fmt.Sprintf("count: %d", killedWorkers), 1))
	workers := make([]int, killedWorkers)
	for i := range workers {
		workers[i] = i + 1
	}
	waitActive(t, m, workers...)
	ids := sendAll(t, m, taskIDs("k", 40), false)

	// 100 times: find an agent in the middle of a task (its command is a
	// child of flock-agent, the unit's main process) and SIGKILL the
	// agent. systemd restarts it; its task must go to another worker or
	// come back to it. Every agent found busy is killed at once, so the
	// restarts overlap rather than queue.
	const kills = 100
	t0 := time.Now()
	findBusy := fmt.Sprintf(`for i in $(seq 1 %d); do p=$(systemctl show -p MainPID --value flock-agent@$i); `, killedWorkers) +
		`if [ "$p" -gt 0 ] && pgrep -P $p >/dev/null; then echo $p; fi; done`
	for killed, batch := 0, 0; killed < kills; {
		pids := strings.Fields(mustRun(t, m, "sh", "-c", findBusy))
		if len(pids) == 0 {
			// No one is mid-task: all restarting, or the queue ran dry
			// (the killed workers' tasks wait out their leases).
			if pendingTasks(t, m) < 8 {
				batch++
				ids = append(ids, sendAll(t, m, taskIDs(fmt.Sprintf("k%d", batch), 20), false)...)
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		pids = pids[:min(len(pids), kills-killed)]
		// Counted as the kernel took each kill: one may have ended since
		// (then its kill fails, and the loop's status with it: true).
		out := mustRun(t, m, "sh", "-c", "for p in "+strings.Join(pids, " ")+"; do kill -9 $p 2>/dev/null && echo killed; done; true")
		killed += strings.Count(out, "killed")
	}
	t.Logf("%d agents killed with SIGKILL in the middle of a task in %v; %d tasks sent", kills, time.Since(t0).Round(time.Second), len(ids))
	t0 = time.Now()
	done := waitAllDone(t, m, ids, 5*time.Minute)
	t.Logf("every task done %v after the last kill", time.Since(t0).Round(time.Second))
	by := map[int]int{}
	for _, e := range done {
		by[e.Agent]++
	}
	t.Logf("%d tasks, each with exactly one result; by agent: %v", len(ids), by)
}

func TestBusRestartsLoseNoTask(t *testing.T) {
	// Tier: root + nspawn.
	m := harness.Boot(t)
	provision(t, m, durableSpec)
	waitActive(t, m, 1, 2, 3, 4)
	var ids []string
	for r := 0; r < 10; r++ {
		ids = append(ids, sendAll(t, m, taskIDs(fmt.Sprintf("r%d", r), 10), true)...)
		mustRun(t, m, "systemctl", "restart", "flock.service")
	}
	waitAllDone(t, m, ids, 3*time.Minute)
	waitBus(t, m, time.Now(), 1, 2, 3, 4)
	t.Logf("%d tasks sent across 10 bus restarts, each with exactly one result; all agents back", len(ids))
}

func TestRebootCompletesQueuedTasks(t *testing.T) {
	// Tier: root + nspawn.
	m := harness.Boot(t)
	provision(t, m, durableSpec)
	before := waitActive(t, m, 1, 2, 3, 4)
	ids := sendAll(t, m, taskIDs("b", 60), false)
	if err := m.Reboot(t.Context()); err != nil {
		t.Fatal(err)
	}
	after := waitActive(t, m, 1, 2, 3, 4)
	for i := range before {
		if before[i].UID != after[i].UID {
			t.Errorf("agent %d: uid %d before the reboot, %d after", before[i].ID, before[i].UID, after[i].UID)
		}
	}
	waitAllDone(t, m, ids, 3*time.Minute)
	t.Logf("%d tasks queued before a reboot all completed after it, each once", len(ids))
}
