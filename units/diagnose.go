package units

import (
	"fmt"
	"regexp"
	"strings"
	"syscall"

	"github.com/flockrun/flock/spec"
)

// Exit is how a unit's main process last ended, as systemd reports it
// (ExecMainCode, ExecMainStatus).
type Exit struct {
	Code   string // "exited", "killed", "dumped"; "" while it has not ended
	Status int    // the exit status, or the signal's number
}

// String is the exit in words: "exited 1", "killed by SIGTRAP".
func (e Exit) String() string {
	switch e.Code {
	case "":
		return "-"
	case "exited":
		return fmt.Sprintf("exited %d", e.Status)
	}
	return fmt.Sprintf("%s by %s", e.Code, signalName(e.Status))
}

// Ended says how the process ended, as a sentence's verb: "exited 1",
// "was killed by SIGTRAP", "dumped core on SIGSEGV".
func (e Exit) Ended() string {
	switch e.Code {
	case "exited", "":
		return e.String()
	case "dumped":
		return "dumped core on " + signalName(e.Status)
	}
	return "was " + e.String()
}

// Failed says whether the process ended by itself with an error or by a
// signal.
func (e Exit) Failed() bool { return e.Code != "" && (e.Code != "exited" || e.Status != 0) }

func signalName(n int) string {
	if name := unixSignals[n]; name != "" {
		return name
	}
	return fmt.Sprintf("signal %d", n)
}

var unixSignals = map[int]string{
	int(syscall.SIGABRT): "SIGABRT", int(syscall.SIGBUS): "SIGBUS", int(syscall.SIGILL): "SIGILL",
	int(syscall.SIGKILL): "SIGKILL", int(syscall.SIGSEGV): "SIGSEGV", int(syscall.SIGSYS): "SIGSYS",
	int(syscall.SIGTERM): "SIGTERM", int(syscall.SIGTRAP): "SIGTRAP",
}

// Diagnosis names the wall of an agent's unit that likely kills it, and
// the spec change that lifts it.
type Diagnosis struct {
	Wall string `json:"wall"`
	Why  string `json:"why"`
	Fix  string `json:"fix"`
}

var (
	// What JITs print when they cannot make memory executable: V8's check
	// in SetPermissions, HotSpot's "Failed to mark memory page as
	// executable", .NET's and others' failing mprotect.
	wxRefused = regexp.MustCompile(`(?i)failed to mark memory page as executable|OS::SetPermissions|mprotect.*(operation not permitted|permission denied)|cannot allocate executable memory`)
	// A refused call, in the words programs print for EPERM, EACCES and
	// EROFS.
	refused = regexp.MustCompile(`(?i)operation not permitted|permission denied|read-only file system|\bEPERM\b|\bEACCES\b|\bEROFS\b`)
)

// refusedStorm is how many refusals in the journal's tail make a pattern.
const refusedStorm = 5

// Looping says whether a unit keeps dying: restarted by systemd, or
// failed for good, its last exit an error.
func Looping(st Status) bool {
	return (st.Restarts > 0 || st.ActiveState == "failed") && st.LastExit.Failed()
}

// Diagnose says which wall likely kills agent a, which keeps dying (its
// unit restarted, or failed, its last exit an error), from how it last
// ended and the tail of its journal. ok is false when the agent is not in
// a restart loop or no wall explains it.
func Diagnose(a spec.Agent, st Status, journal string) (d Diagnosis, ok bool) {
	if !Looping(st) {
		return Diagnosis{}, false
	}
	mdwe := a.Level.DeniesWX(a.JIT) // the unit sets MemoryDenyWriteExecute
	signal, sig := st.LastExit.Code != "exited", st.LastExit.Status
	if !signal && a.Level.Profile().SignalExit && sig > 128 && sig <= 128+64 {
		// The runtime (podman, runsc) exits 128+n when the agent dies of
		// signal n.
		signal, sig = true, sig-128
	}
	switch {
	case mdwe && (wxRefused.MatchString(journal) ||
		signal && (sig == int(syscall.SIGTRAP) || sig == int(syscall.SIGSEGV))):
		return Diagnosis{
			Wall: "MemoryDenyWriteExecute",
			Why:  fmt.Sprintf("it %s right after starting, as a JIT (Node's V8, a JVM, .NET, PyPy) does when it cannot make memory executable", st.LastExit.Ended()),
			Fix:  fmt.Sprintf("set jit: true on agent %d; its unit then drops that one wall and keeps every other (flockctl explain %d shows the cost)", a.ID, a.ID),
		}, true
	case signal && sig == int(syscall.SIGSYS):
		return Diagnosis{
			Wall: "SystemCallFilter",
			Why:  "it was killed by SIGSYS: a system call outside the unit's filter",
			Fix:  fmt.Sprintf("run agent %d at level gvisor, whose own kernel answers its calls (level: gvisor and a rootfs)", a.ID),
		}, true
	}
	if lines := refusedLines(journal); len(lines) >= refusedStorm {
		return Diagnosis{
			Wall: "the unit's walls (SystemCallFilter, ProtectSystem=strict, the private file system)",
			Why:  fmt.Sprintf("%d lines of its journal say a call was refused, e.g. %q", len(lines), lines[0]),
			Fix:  fmt.Sprintf("flockctl explain %d lists what the unit refuses; an agent writes only under its own directory ($HOME) and $SHARED_DIR when granted common: rw", a.ID),
		}, true
	}
	return Diagnosis{}, false
}

func refusedLines(journal string) []string {
	var out []string
	for _, l := range strings.Split(journal, "\n") {
		if refused.MatchString(l) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}
