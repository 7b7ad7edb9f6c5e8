package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// runner runs the stages' make targets.
type runner struct {
	make   string
	logs   string
	others []string // every stage's target: none is made again as a prerequisite

	mu  sync.Mutex // one line at a time on out
	out io.Writer
}

// tierResult is one target's run.
type tierResult struct {
	name    string
	elapsed time.Duration
	err     error // the make's, or why it could not start
	times   []testTime
	fails   []failure // why its tests failed
	tail    []string  // its last lines, for a tier that failed with no test to blame
}

// runStage runs the targets of one stage at once and waits for them all.
func (r *runner) runStage(targets []string) []tierResult {
	res := make([]tierResult, len(targets))
	var wg sync.WaitGroup
	for i, target := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prefix := ""
			if len(targets) > 1 {
				prefix = fmt.Sprintf("%-*s | ", width(targets), tierName(target))
			}
			res[i] = r.runTarget(target, prefix)
		}()
	}
	wg.Wait()
	return res
}

func width(targets []string) int {
	w := 0
	for _, t := range targets {
		w = max(w, len(tierName(t)))
	}
	return w
}

// runTarget runs make for one target, its output to out (each line after
// prefix) and to its log, and reads the tests' times from it as it comes.
func (r *runner) runTarget(target, prefix string) tierResult {
	res := tierResult{name: tierName(target)}
	args := []string{"--no-print-directory", "-o", "deps"}
	for _, o := range r.others {
		if o != target {
			args = append(args, "-o", o)
		}
	}
	args = append(args, target)
	r.say(prefix, fmt.Sprintf("=== tier %s: %s %v", res.name, r.make, args))

	logPath := filepath.Join(r.logs, res.name+".log")
	log, err := os.Create(logPath)
	if err != nil {
		res.err = err
		return res
	}
	defer log.Close()
	pr, pw := io.Pipe()
	cmd := exec.Command(r.make, args...)
	cmd.Stdout, cmd.Stderr = pw, pw
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		res.err = fmt.Errorf("%s %v: %w", r.make, args, err)
		return res
	}
	stop := forwardSignals(cmd.Process)
	var parsed times
	var failed fails
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(log, line)
			r.say(prefix, line)
			parsed.line(line)
			failed.line(line)
		}
		// A line longer than the buffer: the rest still goes to the log.
		_, _ = io.Copy(log, pr)
	}()
	res.err = cmd.Wait()
	stop()
	pw.Close()
	<-done
	res.elapsed = time.Since(t0)
	res.times = parsed.tests()
	res.fails, res.tail = failed.failures(), failed.tail
	verdict := "passed"
	if res.err != nil {
		verdict = fmt.Sprintf("FAILED (%v)", res.err)
	}
	r.say(prefix, fmt.Sprintf("=== tier %s: %s in %s; its output is in %s", res.name, verdict, minutes(res.elapsed), logPath))
	return res
}

func (r *runner) say(prefix, line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintln(r.out, prefix+line)
}

// forwardSignals passes SIGINT and SIGTERM on to p (make passes them to
// its recipe) until stop is called, so an interrupted run tears its
// machines down as an interrupted make would.
func forwardSignals(p *os.Process) (stop func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	quit := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-ch:
				_ = p.Signal(s)
			case <-quit:
				return
			}
		}
	}()
	return func() { signal.Stop(ch); close(quit) }
}
