package test

// Tier: root + VM (qemu). Power cuts while tasks are sent, handed out,
// worked and acknowledged: nothing the flock acknowledged is lost
// (docs/design.md, "The bus": what is on disk when the power goes).

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flockrun/flock/operator"
	"github.com/flockrun/flock/test/harness"
)

// powerCutWorker runs each task for the time its payload says ("<id>
// <seconds>") and answers with the id.
const powerCutWorker = `["/bin/sh", "-c", "read id d; sleep \"$d\"; echo \"$id\""]`

// powerCutSpec: two workers; a task may be handed out at every cut, so
// max_deliveries leaves room for many.
func powerCutSpec(sync string) string {
	return "bus: {sync: " + sync + ", max_deliveries: 50}\nagents:\n" +
		"  - {id: 2, command: " + powerCutWorker + "}\n" +
		"  - {id: 3, command: " + powerCutWorker + "}\n"
}

// powerCutSender sends tasks <prefix>-1, -2... one after another, every
// third to agent 3's own queue, the rest to any worker; flockctl send
// prints a task's id once the bus has stored it, and nothing else on
// stdout.
const powerCutSender = `p=$1; n=0
while :; do
	n=$((n+1)); to=worker; [ $((n % 3)) -eq 0 ] && to=3
	flockctl send --no-wait --to $to --id "$p-$n" "$p-$n 0.$((n % 7 + 2))" 2>/dev/null || sleep 0.5
done`

// The moments of the cuts, in order: chosen ones, and random ones.
const (
	cutStored     = "just after send said stored"
	cutHeld       = "while a worker holds a task"
	cutResult     = "just after a result was stored"
	cutRecovering = "while the flock comes back from the last cut"
	cutRandom     = "at a random moment"
)

var powerCutMoments = []string{cutStored, cutHeld, cutResult, cutRandom, cutRecovering,
	cutRandom, cutStored, cutResult, cutHeld, cutRandom}

// TestVMPowerCutsLoseNothing cuts the VM's power (qemu killed, no
// shutdown; harness.VM.PowerCut) at chosen and random moments while a
// sender stores tasks and two workers take, run and finish them. After
// each boot, flock.service and both agents come back by themselves,
// status says so, and the history of the whole run (every send the test
// saw stored, every result it saw, every listing) is judged by
// cutHistory.check: no stored task gone, no result lost, none twice, none
// for a task nobody sent. At the end every stored task is done, once.
//
// FLOCK_POWERCUT_SYNC=2m runs it with the bus's old sync policy (it then
// fails, with the tasks lost); FLOCK_POWERCUT_SEED repeats a run's
// random moments.
// Tier: root + VM (qemu).
func TestVMPowerCutsLoseNothing(t *testing.T) {
	t.Parallel() // as many VMs at once as -parallel allows (Makefile: VM_PARALLEL)
	policy := cmp.Or(os.Getenv("FLOCK_POWERCUT_SYNC"), "always")
	seed, _ := strconv.ParseUint(os.Getenv("FLOCK_POWERCUT_SEED"), 10, 64)
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	rnd := rand.New(rand.NewPCG(seed, seed))
	t.Logf("bus.sync %s, seed %d (FLOCK_POWERCUT_SEED repeats the random moments)", policy, seed)
	t0 := time.Now()
	v := harness.BootVMWith(t, harness.VMOptions{PowerCuts: true})

	t.Run("a cut keeps what was flushed and loses what was not", func(t *testing.T) {
		cutKeepsFlushedOnly(t, v)
	})
	vmProvision(t, v, powerCutSpec(policy))
	vmWaitActive(t, v, 2*time.Minute, 2, 3)

	h := newCutHistory(2, 3)
	var booted, recovered []time.Duration
	ctx := context.Background()
	for i, moment := range powerCutMoments {
		cut := i + 1
		if moment == cutRecovering {
			// Cut again once the bus runs, before anything is checked.
			v.Eventually(t, 3*time.Minute, func() error {
				if out, _, err := run(t, v, "systemctl", "is-active", "flock.service"); err != nil {
					return fmt.Errorf("flock.service is %s", strings.TrimSpace(out))
				}
				return nil
			})
		} else if i > 0 {
			recovered = append(recovered, powerCutRecovered(t, v, h, cut-1, booted[len(booted)-1]))
		}
		s := startSender(t, v, h, fmt.Sprintf("s%d", cut), cut)
		switch moment {
		case cutStored:
			s.waitStored(t, 1+rnd.IntN(4))
		case cutHeld:
			s.waitStored(t, 1)
			waitHeld(t, v)
		case cutResult:
			waitResult(t, v, h, fmt.Sprintf("r%d", cut), cut)
		case cutRecovering:
			time.Sleep(time.Duration(rnd.IntN(3000)) * time.Millisecond)
		case cutRandom:
			s.waitStored(t, 1)
			time.Sleep(time.Duration(500+rnd.IntN(7500)) * time.Millisecond)
		}
		b, err := v.PowerCut(ctx)
		if err != nil {
			t.Fatalf("cut %d (%s): %v", cut, moment, err)
		}
		n := s.wait()
		booted = append(booted, b)
		t.Logf("cut %d %s: %d tasks stored before it; booted again in %v", cut, moment, n, b.Round(time.Second))
	}
	recovered = append(recovered, powerCutRecovered(t, v, h, len(powerCutMoments), booted[len(booted)-1]))

	// The last cut's tasks are finished, each once: waited for while
	// problems remain, then judged (the figures first, so a failing run
	// says what it lost).
	var bad []string
	for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(5 * time.Second) {
		if bad = h.check(vmTasks(t, v), true); len(bad) == 0 || time.Now().After(deadline) {
			break
		}
	}
	lost := 0
	for _, p := range bad {
		if strings.Contains(p, "is gone") {
			lost++
		}
	}
	t.Logf("FIGURE power cuts (bus.sync %s): %d cuts, %d tasks stored, %d results seen by send, %d lost; boot after a cut %s, flock back %s (min/median/max); %v in all",
		policy, len(powerCutMoments), len(h.sent), len(h.results), lost, spread(booted), spread(recovered), time.Since(t0).Round(time.Second))
	for _, p := range bad {
		t.Errorf("at the end: %s", p)
	}
}

// cutKeepsFlushedOnly: a file fsynced before the cut is whole after it, a
// file written just before it and never synced is not there: the cut
// drops what the guest had not flushed, as the power going would.
func cutKeepsFlushedOnly(t *testing.T, v *harness.VM) {
	sum := mustRun(t, v, "sh", "-c", "head -c 1048576 /dev/urandom > /root/synced && sync /root/synced /root && sha256sum /root/synced")
	mustRun(t, v, "sh", "-c", "{ echo unflushed-marker; head -c 1048576 /dev/urandom; } > /root/unsynced")
	if _, err := v.PowerCut(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after := mustRun(t, v, "sha256sum", "/root/synced"); after != sum {
		t.Errorf("the synced file changed across the cut: %q, was %q", after, sum)
	}
	if out, _, _ := run(t, v, "sh", "-c", "head -c 16 /root/unsynced 2>&1; stat -c %s /root/unsynced 2>&1"); strings.Contains(out, "unflushed-marker") {
		t.Errorf("a file never synced survived the cut whole, so the cut does not drop unflushed writes:\n%s", out)
	} else {
		t.Logf("the file never synced after the cut: %s", strings.TrimSpace(out))
	}
}

// powerCutRecovered waits until flock.service and both workers are back
// by themselves after cut (no flockctl provision), and status says so,
// then judges what flockctl tasks lists against the history. It returns
// how long the flock took to come back from the cut.
func powerCutRecovered(t *testing.T, v *harness.VM, h *cutHistory, cut int, booted time.Duration) time.Duration {
	t.Helper()
	t0 := time.Now()
	v.Eventually(t, 3*time.Minute, func() error {
		if out, _, err := run(t, v, "systemctl", "is-active", "flock.service"); err != nil {
			return fmt.Errorf("flock.service is %s", strings.TrimSpace(out))
		}
		st, err := vmStatus(t, v)
		if err != nil {
			return err
		}
		if err := allActive(st, 2, 3); err != nil {
			return err
		}
		for _, a := range st {
			if a.Bus != "connected" || a.Drift != "" {
				return fmt.Errorf("status after cut %d: agent %d bus %q, drift %q", cut, a.ID, a.Bus, a.Drift)
			}
		}
		return nil
	})
	back := booted + time.Since(t0)
	entries := vmTasks(t, v)
	for _, p := range h.check(entries, false) {
		t.Errorf("after cut %d: %s", cut, p)
	}
	h.seen = append(h.seen, entries)
	return back
}

// vmTasks is flockctl tasks --output json, every result.
func vmTasks(t *testing.T, v *harness.VM) []operator.TaskEntry {
	t.Helper()
	out := mustRun(t, v, "flockctl", "tasks", "--output", "json", "--limit", "1000000")
	var es []operator.TaskEntry
	if err := json.Unmarshal([]byte(out), &es); err != nil {
		t.Fatalf("flockctl tasks --output json: %v\n%s", err, out)
	}
	return es
}

// sender is powerCutSender running in the VM, its confirmations recorded
// in the history as they come.
type sender struct {
	mu     sync.Mutex
	n      int
	more   chan struct{} // a confirmation came
	done   chan struct{}
	waitFn func() error
}

func startSender(t *testing.T, v *harness.VM, h *cutHistory, prefix string, cut int) *sender {
	t.Helper()
	h.sender(prefix)
	lines, wait, err := v.Stream(context.Background(), "sh", "-c", powerCutSender, "sh", prefix)
	if err != nil {
		t.Fatal(err)
	}
	s := &sender{more: make(chan struct{}, 1), done: make(chan struct{}), waitFn: wait}
	go func() {
		defer close(s.done)
		for id := range lines {
			if !strings.HasPrefix(id, prefix+"-") {
				continue // not a confirmation
			}
			s.mu.Lock()
			h.stored(id, cut)
			s.n++
			s.mu.Unlock()
			select {
			case s.more <- struct{}{}:
			default:
			}
		}
	}()
	return s
}

// waitStored waits until n sends were confirmed.
func (s *sender) waitStored(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	for {
		s.mu.Lock()
		got := s.n
		s.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-s.more:
		case <-s.done:
			t.Fatalf("the sender ended after %d confirmations, want %d", got, n)
		case <-deadline:
			t.Fatalf("%d confirmations in 2m, want %d", got, n)
		}
	}
}

// wait waits for the sender's end (the cut ends its ssh) and returns how
// many sends it confirmed.
func (s *sender) wait() int {
	<-s.done
	_ = s.waitFn()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// waitHeld waits until flockctl tasks shows a task in a worker's hands.
func waitHeld(t *testing.T, v *harness.VM) {
	t.Helper()
	v.Eventually(t, 2*time.Minute, func() error {
		for _, e := range vmTasks(t, v) {
			if e.State == operator.Running && e.Holder != 0 {
				return nil
			}
		}
		return fmt.Errorf("no task held by a worker")
	})
}

// waitResult sends one task to agent 2's own queue (served before the
// shared one) and waits until send prints its result: stored, and its
// acknowledgement on its way.
func waitResult(t *testing.T, v *harness.VM, h *cutHistory, prefix string, cut int) {
	t.Helper()
	id := prefix + "-1"
	h.sender(prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lines, wait, err := v.Stream(ctx, "flockctl", "send", "--to", "2", "--id", id, id+" 0.1")
	if err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		if l == id {
			h.stored(id, cut)
			h.results[id] = true
			return // the cut ends the stream
		}
	}
	t.Fatalf("flockctl send --to 2 --id %s ended without its result: %v", id, wait())
}

// spread is the min, median and max of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	r := func(d time.Duration) string { return d.Round(time.Second).String() }
	return r(s[0]) + "/" + r(s[len(s)/2]) + "/" + r(s[len(s)-1])
}
