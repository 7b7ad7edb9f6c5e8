package harness

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// procID names one process for its whole life: a PID alone may be reused
// by an unrelated process once the first one is gone.
type procID struct {
	pid   int
	start uint64 // starttime, field 22 of /proc/<pid>/stat
}

func (p procID) String() string { return fmt.Sprintf("%d %d", p.pid, p.start) }

func parseProcID(s string) (procID, error) {
	var p procID
	if _, err := fmt.Sscanf(strings.TrimSpace(s), "%d %d", &p.pid, &p.start); err != nil {
		return procID{}, fmt.Errorf("process record %q: %w", s, err)
	}
	return p, nil
}

// procOf reads pid's identity, or an error when there is no such process.
func procOf(pid int) (procID, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procID{}, err
	}
	// comm, field 2, is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procID{}, fmt.Errorf("/proc/%d/stat: no ')' in %q", pid, s)
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3
	if len(f) < 20 {
		return procID{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procID{}, fmt.Errorf("/proc/%d/stat starttime: %w", pid, err)
	}
	return procID{pid: pid, start: start}, nil
}

// alive says whether p is still the same running process (zombies count
// as gone).
func (p procID) alive() bool {
	q, err := procOf(p.pid)
	if err != nil || q.start != p.start {
		return false
	}
	st, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(st)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// comm is the process's command name, "" if gone.
func comm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// children lists pid's children, over all its threads.
func children(pid int) []int {
	var kids []int
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if k, err := strconv.Atoi(f); err == nil {
				kids = append(kids, k)
			}
		}
	}
	return kids
}

// isNamespaceInit says whether pid is PID 1 of a PID namespace below ours:
// the last NSpid of /proc/<pid>/status is 1.
func isNamespaceInit(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "NSpid:"); ok {
			f := strings.Fields(rest)
			return len(f) >= 2 && f[len(f)-1] == "1"
		}
	}
	return false
}

// pgrp is pid's process group, -1 if it is gone.
func pgrp(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // f[0] is field 3
	if len(f) < 3 {
		return -1
	}
	g, err := strconv.Atoi(f[2])
	if err != nil {
		return -1
	}
	return g
}
