package units

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/wire"
)

// Options are facts of the host that change the property set.
type Options struct {
	// SystemdVersion enables properties newer systemds have (254+:
	// RestartSteps); 0 means the oldest supported, 252.
	SystemdVersion int
	// AgentBin is the runner every unit starts (flockctl finds it:
	// FindPrograms); default DefaultAgentBin.
	AgentBin string
	// FlockctlBin runs the bus (flock.service); default DefaultFlockctlBin.
	FlockctlBin string
	// AgentBuild and FlockctlBuild are the installed programs' BuildIDs
	// ("" unknown): part of what a unit is, so an upgrade restarts it.
	AgentBuild, FlockctlBuild string
	// Runtimes are the contained levels' runtimes as found on the host;
	// a level missing here has its driver's default.
	Runtimes sandbox.Runtimes
	// Placeholders are what each agent holds of the secrets it is
	// granted (agent id -> secret name -> placeholder), drawn by root
	// from the secrets' files and the placeholder key (plan.Placeholders).
	// Not saved with a host's state: they are drawn on the host.
	Placeholders map[int]map[string]string `json:"-"`
	// SecretsDigest is of the secrets flock-proxy is handed
	// (plan.SecretsDigest), ModelsDigest of the model APIs' keys and CAs
	// (plan.DrawModels): its unit carries them, so a rotated one is
	// handed to the proxy at a reload and no agent restarts.
	SecretsDigest string `json:"-"`
	ModelsDigest  string `json:"-"`
}

// DefaultAgentBin is where `make install` puts flock-agent.
const DefaultAgentBin = "/usr/local/bin/flock-agent"

// The D-Bus shapes of the structured properties, in systemd's field order.
type (
	// ExecCommand is one entry of ExecStart, a(sasb).
	ExecCommand struct {
		Path          string
		Argv          []string
		IgnoreFailure bool
	}
	// TmpFS is one entry of TemporaryFileSystem, a(ss).
	TmpFS struct {
		Path    string
		Options string
	}
	// BindPath is one entry of BindPaths, a(ssbt).
	BindPath struct {
		Source        string
		Destination   string
		IgnoreMissing bool
		MountFlags    uint64
	}
	// ExitStatusSet is SuccessExitStatus, (aiai): exit statuses, then
	// signals.
	ExitStatusSet struct {
		Statuses []int32
		Signals  []int32
	}
	// FileMode is a u that reads as octal.
	FileMode uint32
	// NameList is an allow or deny list, (bas): SystemCallFilter,
	// RestrictAddressFamilies.
	NameList struct {
		Allow bool
		Names []string
	}
)

// CredentialPath is where every agent reads its bus credential: its unit
// binds the agent's own seed there, read-only, in the unit's own mount
// namespace. On the host it is an empty file systemd makes as the mount
// point; no agent's seed is there, and the host's mount table has no
// entry per agent (docs/design.md, "Credentials").
const CredentialPath = "/run/flock-agent/nats"

// landlockSyscalls are what flock-agent needs to scope IPC (docs/design.md,
// "Hardening at level process"), and seccomp, which loads its walls
// (agent.Walls); @system-service on systemd 252 does not include them.
var landlockSyscalls = []string{"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self", "seccomp"}

// eperm is errno EPERM: a filtered syscall fails with it instead of killing
// the agent with SIGSYS, so a tool gets an error it can report.
const eperm int32 = 1

func usec(d time.Duration) uint64 { return uint64(d / time.Microsecond) }

// ForAgent is the transient unit of agent a: who it runs as, what it runs,
// and the hardening of level process (docs/design.md, "Hardening at level process"). It depends
// on nothing but a's own entry and the flock's paths, so adding or changing
// one agent never changes another's unit.
func ForAgent(f *spec.Flock, a spec.Agent, o Options) Unit {
	var mode []string
	switch {
	case len(a.Exec) > 0:
		mode = append([]string{"exec", "--"}, a.Exec...)
	case len(a.Command) > 0:
		mode = append([]string{"task", "--"}, a.Command...)
	}
	return forAgent(f, a, o, levelOf(f, a, o, mode, ""))
}

// forAgent lays out agent a's unit around lv, what its level changes,
// decided before (levelOf): it asks the level nothing itself.
func forAgent(f *spec.Flock, a spec.Agent, o Options, lv unitLevel) Unit {
	bin := o.AgentBin
	if bin == "" {
		bin = DefaultAgentBin
	}
	user := spec.UserName(a.ID)
	dir, logFile := f.AgentDir(a.ID), f.LogPath(a.ID)
	argv := append([]string{bin}, agent.UnitArgs(lv.args)...)
	props := []Property{
		{"Type", "exec"}, // the start job fails if the runner cannot be executed
		// ExecStart, not ExecStartEx with no-env-expand: systemd 252
		// writes ExecStartEx into the transient unit's file and cannot
		// read it back, so a daemon-reload left every agent without a
		// command. agent.UnitArgs keeps "$" and ";" off the line, which
		// 252 cannot read back either: the spec's argv reaches the
		// program as written, before a reload and after.
		{"ExecStart", []ExecCommand{{Path: bin, Argv: argv}}},
	}
	props = append(props, lv.identity...)
	props = append(props,
		Property{"WorkingDirectory", dir},
		Property{"Environment", agent.Env{
			ID: a.ID, Role: string(a.Role), NATSURL: f.Bus.URL(),
			NKeyFile: CredentialPath, InboxPrefix: wire.Inbox(a.ID),
			SharedDir: f.CommonDir(), LogFile: logFile, Home: dir,
			Heartbeat: a.Heartbeat, TaskTimeout: a.TaskTimeout, MaxOutput: int(a.MaxOutput),
			JIT: a.JIT, Extra: slices.Concat(specEnv(a), proxyEnv(f, a), modelEnv(f, a), secretEnv(f, a, o.Placeholders[a.ID])),
		}.Environ()},
		// Its bus identity: its own seed, bound read-only where it reads
		// it. Not LoadCredential=: each such unit mounts a directory in
		// the host's mount namespace, and systemd re-reads the whole
		// mount table at every change, so each start cost more than the
		// last (500 units: 155 s against 16.5 s).
		Property{"BindReadOnlyPaths", []BindPath{{Source: spec.CredPath(user), Destination: CredentialPath}}},
		Property{"InaccessiblePaths", lv.inaccessible},
		Property{"UMask", FileMode(0o077)},
	)
	props = append(props, lv.walls...)
	props = append(props,
		// Limits: at level podman and gvisor they bound the container too,
		// which stays in this unit's cgroup.
		Property{"MemoryMax", a.Limits.MemoryBytes},
		Property{"MemorySwapMax", uint64(0)}, // the limit is RAM, not RAM plus swap
		Property{"CPUQuotaPerSecUSec", uint64(a.Limits.CPUPercent) * 10000},
		Property{"TasksMax", uint64(a.Limits.Tasks) + lv.runtimeTasks},
	)
	props = append(props, restartPolicy(o.SystemdVersion)...)
	props = append(props,
		// SIGTERM to flock-agent alone: it stops a running task's command
		// itself and gives the task back to the queue. Sent to the whole
		// cgroup, the command could die first and be reported as failed.
		// (At the container levels the runtime passes it on to the
		// flock-agent inside.) What is left after it exits gets SIGKILL.
		Property{"KillMode", "mixed"},
		Property{"TimeoutStopUSec", usec(15 * time.Second)},
		// A JVM, and any program that follows the shell's convention,
		// exits 128+15 when SIGTERM ends it: a stop, not a failure (else
		// the unit ends "failed" after every stop).
		Property{"SuccessExitStatus", ExitStatusSet{Statuses: []int32{128 + 15}}})

	u := Unit{Name: spec.UnitName(a.ID), Properties: props, Build: o.AgentBuild}
	u.Hash = hashOf(props, o.AgentBuild)
	u.Description = fmt.Sprintf("flock agent %d: %s [flock:%s]", a.ID, lv.label, u.Hash)
	if u.Build != "" {
		// Said apart from the hash, so that after an upgrade status
		// says what changed: the program, not the configuration.
		u.Description = fmt.Sprintf("flock agent %d: %s [flock:%s build:%s]", a.ID, lv.label, u.Hash, u.Build)
	}
	return u
}

// processHardening is level process: the agent's own uid in a unit that
// can do nothing else (docs/design.md, "Hardening at level process").
func processHardening(f *spec.Flock, a spec.Agent) []Property {
	dir, logFile := f.AgentDir(a.ID), f.LogPath(a.ID)
	rw := []string{dir, logFile}
	if a.Common == spec.AccessRW {
		rw = append(rw, f.CommonDir())
	}
	return []Property{
		// The file system: read-only everywhere but its own directory and
		// log (and common when granted rw); other agents' directories and
		// logs are not there at all: agents/ and logs/ are an empty
		// read-only tmpfs with only its own entries bound back.
		{"ProtectSystem", "strict"},
		{"ProtectHome", "yes"},
		// /dev/shm: its own, writable (POSIX semaphores and shm_open need
		// it), where PrivateDevices alone would keep the host's.
		{"TemporaryFileSystem", []TmpFS{{f.AgentsDir(), "ro"}, {f.LogsDir(), "ro"}, {"/dev/shm", "mode=1777,nosuid,nodev"}}},
		{"BindPaths", []BindPath{{Source: dir, Destination: dir}, {Source: logFile, Destination: logFile}}},
		{"ReadWritePaths", rw},
		{"PrivateTmp", true},
		{"PrivateDevices", true},
		{"PrivateIPC", true},
		{"PrivateUsers", true},
		{"RemoveIPC", true},
		{"ProtectProc", "invisible"},

		// Privileges and the kernel.
		{"NoNewPrivileges", true},
		{"CapabilityBoundingSet", uint64(0)},
		{"AmbientCapabilities", uint64(0)},
		{"RestrictSUIDSGID", true},
		{"ProtectKernelTunables", true},
		{"ProtectKernelModules", true},
		{"ProtectKernelLogs", true},
		{"ProtectControlGroups", true},
		{"ProtectClock", true},
		{"ProtectHostname", true},
		{"RestrictNamespaces", uint64(0)}, // no namespace may be created
		{"LockPersonality", true},
		{"RestrictRealtime", true},
		// No memory both writable and executable, unless the agent runs a
		// JIT (spec jit: true), which needs it and loses this wall alone.
		{"MemoryDenyWriteExecute", !a.JIT},
		{"KeyringMode", "private"},
		{"SystemCallArchitectures", []string{"native"}},
		{"SystemCallFilter", NameList{true, append([]string{"@system-service"}, landlockSyscalls...)}},
		{"SystemCallFilter", NameList{false, []string{"io_uring_setup", "io_uring_enter", "io_uring_register"}}},
		{"SystemCallErrorNumber", eperm},
		{"RestrictAddressFamilies", NameList{true, []string{"AF_INET", "AF_INET6", "AF_UNIX"}}},
	}
}

// restartPolicy restarts a failed agent and never gives up (a bus outage
// must not leave agents dead). systemd 254+ backs off from 1 s to a
// minute; 252 can only wait a fixed time, so it waits 5 s.
func restartPolicy(version int) []Property {
	ps := []Property{
		{"Restart", "on-failure"},
		{"StartLimitIntervalUSec", uint64(0)},
	}
	if version >= 254 {
		return append(ps,
			Property{"RestartUSec", usec(time.Second)},
			Property{"RestartSteps", uint32(8)},
			Property{"RestartMaxDelayUSec", usec(time.Minute)})
	}
	return append(ps, Property{"RestartUSec", usec(5 * time.Second)})
}

func hashOf(props []Property, build string) string {
	in := renderProps(props)
	if build != "" {
		in += "build " + build + "\n"
	}
	sum := sha256.Sum256([]byte(in))
	return hex.EncodeToString(sum[:6])
}

var hashRe = regexp.MustCompile(`\[flock:([0-9a-f]{12})(?: build:([0-9a-f]{12}))?\]$`)

// HashFromDescription reads back the hash ForAgent put in a description.
func HashFromDescription(desc string) string {
	h, _ := FromDescription(desc)
	return h
}

// FromDescription reads back the hash and the flock-agent build ForAgent
// put in a description ("" for what it does not say).
func FromDescription(desc string) (hash, build string) {
	if m := hashRe.FindStringSubmatch(desc); m != nil {
		return m[1], m[2]
	}
	return "", ""
}

// specEnv is the spec's env for a, sorted by name: a unit's Environment=
// is part of its hash, so the order must not move.
func specEnv(a spec.Agent) []string {
	var env []string
	for _, k := range slices.Sorted(maps.Keys(a.Env)) {
		env = append(env, k+"="+a.Env[k])
	}
	return env
}

// proxyEnv points the HTTP clients of an agent with names in its egress
// at the proxy (both spellings: curl reads only the lower-case
// http_proxy, Go and Python either), and keeps the bus off it. Others get
// nothing: they cannot reach the proxy.
func proxyEnv(f *spec.Flock, a spec.Agent) []string {
	if !a.HasNames() {
		return nil
	}
	url := "http://" + spec.DefaultProxyListen
	no := f.Bus.Host + ",localhost"
	var env []string
	for _, kv := range [][2]string{{"HTTPS_PROXY", url}, {"HTTP_PROXY", url}, {"NO_PROXY", no}} {
		env = append(env, kv[0]+"="+kv[1], strings.ToLower(kv[0])+"="+kv[1])
	}
	return env
}
