package main

// probe cgroup: watch agents' cgroups from inside the VM, where a sample
// every few milliseconds costs nothing next to an ssh round trip per read.
// A unit that restarts gets a new cgroup at the same path; the watch
// follows it across restarts.

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CgroupWatch is what one cgroup did during the watch.
type CgroupWatch struct {
	Path    string `json:"path"`
	Samples int    `json:"samples"` // reads while the cgroup existed
	Absent  int    `json:"absent"`  // reads while it did not (a unit between runs)
	// Max of pids.current, pids.peak, memory.current and memory.peak.
	Max map[string]uint64 `json:"max"`
	// Events is the largest count seen of each memory.events and
	// pids.events key, e.g. "memory.events.oom_kill", "pids.events.max"
	// (counts restart with each run of the unit).
	Events map[string]uint64 `json:"events"`
	// CPUUsec is the CPU time used during the watch (cpu.stat
	// usage_usec), summed over the cgroup's runs; WallUsec is the watch's
	// length, first sample to last.
	CPUUsec  uint64 `json:"cpu_usage_usec"`
	WallUsec uint64 `json:"wall_usec"`
}

var watchedMax = []string{"pids.current", "pids.peak", "memory.current", "memory.peak"}

func cgroupWatch(args []string) error {
	fl := flag.NewFlagSet("cgroup", flag.ContinueOnError)
	dur := fl.Duration("for", 10*time.Second, "how long to watch")
	every := fl.Duration("every", 20*time.Millisecond, "how often to sample")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() == 0 {
		return fmt.Errorf("usage: probe cgroup [-for D] [-every D] CGROUP_DIR...")
	}
	ws := make([]*CgroupWatch, fl.NArg())
	prev := make([]int64, fl.NArg()) // last usage_usec read; -1: none (absent)
	for i, p := range fl.Args() {
		ws[i] = &CgroupWatch{Path: p, Max: map[string]uint64{}, Events: map[string]uint64{}}
		prev[i] = -1
	}
	start := time.Now()
	var last time.Time
	for t := range time.Tick(*every) {
		last = t
		for i, w := range ws {
			prev[i] = sample(w, prev[i])
		}
		if t.Sub(start) >= *dur {
			break
		}
	}
	for _, w := range ws {
		w.WallUsec = uint64(last.Sub(start).Microseconds())
	}
	b, err := json.Marshal(ws)
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	return nil
}

// sample reads w's files once and returns the usage_usec read, or -1.
func sample(w *CgroupWatch, prev int64) int64 {
	stat, err := os.ReadFile(filepath.Join(w.Path, "cpu.stat"))
	if err != nil {
		w.Absent++
		return -1
	}
	w.Samples++
	for _, f := range watchedMax {
		if v, ok := readUint(filepath.Join(w.Path, f)); ok && v > w.Max[f] {
			w.Max[f] = v
		}
	}
	for _, f := range []string{"memory.events", "pids.events"} {
		b, _ := os.ReadFile(filepath.Join(w.Path, f))
		for k, v := range keyValues(string(b)) {
			if k = f + "." + k; v > w.Events[k] {
				w.Events[k] = v
			}
		}
	}
	use, ok := keyValues(string(stat))["usage_usec"]
	if !ok {
		return prev
	}
	cur := int64(use)
	switch {
	case prev < 0:
		// First read of a run: a run that began during the watch used
		// all of cur in it; the run found at the start is the baseline.
		if w.Samples > 1 || w.Absent > 0 {
			w.CPUUsec += use
		}
	case cur >= prev:
		w.CPUUsec += uint64(cur - prev)
	default: // a new run between two samples
		w.CPUUsec += use
	}
	return cur
}

func readUint(p string) (uint64, bool) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// keyValues reads "key value" lines (cpu.stat, memory.events).
func keyValues(s string) map[string]uint64 {
	kv := map[string]uint64{}
	for _, l := range strings.Split(s, "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			if v, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				kv[f[0]] = v
			}
		}
	}
	return kv
}
