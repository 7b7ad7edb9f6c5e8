package events

import (
	"fmt"
	"strconv"
	"strings"
)

// systemd's MESSAGE_IDs (sd-messages.h; `journalctl --list-catalog`) for
// what happens to a unit. They and their fields (UNIT, N_RESTARTS,
// EXIT_CODE, EXIT_STATUS, UNIT_RESULT) are read, never the message text.
const (
	msgStarted      = "39f53479d3a045ac8e11786248231fbf" // a start job finished
	msgStartFailed  = "be02cf6855d2428ba40df7e9d022f03d" // a start job failed
	msgStopped      = "9d1aaa27d60140bd96365438aad20286" // a stop job finished
	msgRestart      = "5eb03494b6584870a536b337290809b3" // automatic restart scheduled
	msgFailure      = "d9b373ed55a64feb8242e02dbe79a49c" // the unit failed (UNIT_RESULT)
	msgProcessExit  = "98e322203f7a4ed290d09fe03c09fe15" // a process of the unit exited
	msgOutOfMemory  = "fe6faa94e7774663a0da52717891d8ef" // a process killed by the OOM killer
	kernelLogPrefix = "flock-deny "                      // netpolicy.LogPrefix
)

// SystemdMessageIDs are the MESSAGE_IDs Map reads.
var SystemdMessageIDs = []string{msgStarted, msgStartFailed, msgStopped, msgRestart, msgFailure, msgProcessExit, msgOutOfMemory}

// Units whose events are the flock's own (agent 0).
const (
	busUnit   = "flock.service"
	proxyUnit = "flock-proxy.service"
)

// exitKind is a process exit: not shown, folded into the failure that
// follows it (fold).
const exitKind Kind = "exit"

// mapped is one entry as an event, with what fold needs of it.
type mapped struct {
	Event
	unit   string // the systemd unit it is about ("" for other sources)
	exit   exit   // exitKind: how the process ended
	result string // Failed from systemd: UNIT_RESULT
	job    string // Stopped: JOB_TYPE, "restart" for the first half of a restart
}

// exit is how a process ended: EXIT_CODE exited, killed or dumped, and
// EXIT_STATUS, the status or the signal's number.
type exit struct {
	code   string
	status int
}

func (x exit) String() string {
	if x.code == "exited" {
		return fmt.Sprintf("exited with status %d", x.status)
	}
	return fmt.Sprintf("%s by %s", x.code, signalName(x.status))
}

func signalName(n int) string {
	if s, ok := sigNames[n]; ok {
		return "SIG" + s
	}
	return "signal " + strconv.Itoa(n)
}

var sigNames = map[int]string{1: "HUP", 2: "INT", 3: "QUIT", 4: "ILL", 5: "TRAP", 6: "ABRT", 7: "BUS", 8: "FPE",
	9: "KILL", 10: "USR1", 11: "SEGV", 12: "USR2", 13: "PIPE", 14: "ALRM", 15: "TERM", 31: "SYS"}

// Map reads one journal entry as an event (ok false: not one of flock's).
// Pure. An entry counts only if the fields journald itself sets say who
// wrote it (agents can write to the journal too): systemd's messages come
// from PID 1, the firewall's from the kernel, the proxy's and the bus's
// from their units, drift from root.
func Map(e Entry, uidBase uint32) (mapped, bool) {
	t := e.Time()
	switch {
	case e["_TRANSPORT"] == "kernel":
		return mapKernel(e, uidBase)
	case e["_PID"] == "1" && e["_TRANSPORT"] == "journal" && e["MESSAGE_ID"] != "":
		return mapSystemd(e)
	case e["_SYSTEMD_UNIT"] == proxyUnit && e["DECISION"] == "deny":
		agent, _ := strconv.Atoi(e["AGENT_ID"])
		d := fmt.Sprintf("CONNECT %s:%s refused: %s", e["NAME"], e["PORT"], e["REASON"])
		if e["DETAIL"] != "" {
			d += ": " + e["DETAIL"]
		}
		if n := e["SUPPRESSED"]; n != "" {
			d += " (" + n + " more denials of this agent before it not logged)"
		}
		return mapped{Event: Event{Time: t, Agent: agent, Kind: EgressDenied, Detail: d, Source: "proxy"}}, true
	}
	r, ok := recordOf(e)
	if !ok {
		return mapped{}, false
	}
	switch r.Kind {
	case BusViolation, DeadLettered, StoreDamaged:
		if e["_SYSTEMD_UNIT"] != busUnit {
			return mapped{}, false
		}
		return mapped{Event: Event{Time: t, Agent: r.Agent, Kind: r.Kind, Detail: r.Detail, Source: "bus"}}, true
	case DriftFound, DriftRepaired:
		if e["_UID"] != "0" {
			return mapped{}, false
		}
		return mapped{Event: Event{Time: t, Agent: r.Agent, Kind: r.Kind, Detail: r.Detail, Source: "flockctl"}}, true
	}
	return mapped{}, false
}

// agentOfUnit is the agent a unit runs (0: the bus or the proxy; ok false:
// not flock's).
func agentOfUnit(unit string) (int, bool) {
	if unit == busUnit || unit == proxyUnit {
		return 0, true
	}
	s, ok := strings.CutPrefix(unit, "flock-agent@")
	if !ok {
		return 0, false
	}
	id, err := strconv.Atoi(strings.TrimSuffix(s, ".service"))
	if err != nil || id < 1 || !strings.HasSuffix(s, ".service") {
		return 0, false
	}
	return id, true
}

func mapSystemd(e Entry) (mapped, bool) {
	unit := e["UNIT"]
	agent, ok := agentOfUnit(unit)
	if !ok {
		return mapped{}, false
	}
	m := mapped{Event: Event{Time: e.Time(), Agent: agent, Source: "systemd"}, unit: unit}
	switch e["MESSAGE_ID"] {
	case msgStarted:
		m.Kind, m.Detail = Started, unit+" started"
	case msgStopped:
		m.Kind, m.Detail, m.job = Stopped, unit+" stopped", e["JOB_TYPE"]
	case msgStartFailed:
		m.Kind, m.Detail = Failed, unit+" failed to start (job "+e["JOB_RESULT"]+")"
	case msgRestart:
		m.Kind, m.Detail = Restarted, unit+" restarted by systemd (restart "+e["N_RESTARTS"]+")"
	case msgOutOfMemory:
		m.Kind, m.Detail = OOMKilled, "a process of "+unit+" was killed by the kernel's OOM killer at the unit's MemoryMax (limits.memory)"
	case msgFailure:
		m.Kind, m.result, m.Detail = Failed, e["UNIT_RESULT"], unit+" failed (result "+e["UNIT_RESULT"]+")"
	case msgProcessExit:
		st, err := strconv.Atoi(e["EXIT_STATUS"])
		if err != nil {
			return mapped{}, false
		}
		m.Kind, m.exit = exitKind, exit{code: e["EXIT_CODE"], status: st}
	default:
		return mapped{}, false
	}
	return m, true
}

// mapKernel reads the firewall's log line: the fields nft's log writes
// ("flock-deny IN= OUT=lo SRC=… DST=… … PROTO=TCP SPT=… DPT=… … UID=… GID=…").
func mapKernel(e Entry, uidBase uint32) (mapped, bool) {
	rest, ok := strings.CutPrefix(e["MESSAGE"], kernelLogPrefix)
	if !ok {
		return mapped{}, false
	}
	f := map[string]string{}
	for _, w := range strings.Fields(rest) {
		if k, v, ok := strings.Cut(w, "="); ok {
			f[k] = v
		}
	}
	uid, err := strconv.ParseUint(f["UID"], 10, 32)
	if err != nil || uint32(uid) <= uidBase || uint32(uid)-uidBase > 65535 {
		return mapped{}, false
	}
	to := f["DST"]
	if f["DPT"] != "" {
		to = hostPort(to, f["DPT"])
	}
	d := fmt.Sprintf("%s to %s refused by table inet flock (kernel log; at most 5 a minute per agent)", f["PROTO"], to)
	return mapped{Event: Event{Time: e.Time(), Agent: int(uint32(uid) - uidBase), Kind: FirewallRefused, Detail: d, Source: "kernel"}}, true
}

func hostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}
