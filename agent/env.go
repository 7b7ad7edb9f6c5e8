// Package agent is the agent's side of flock: what a unit hands an agent
// (its id, role, bus address and credential, the shared directory, its log
// file, its limits), structured logging to the journal and the log file,
// the Landlock scope that keeps an agent's abstract UNIX sockets and
// signals to itself, the seccomp walls (Walls), and the bus client:
// heartbeats, events and tasks.
package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Defaults when the unit leaves a variable unset; they equal spec's
// (agent does not import spec, to keep the YAML parser out of agents).
const (
	DefaultHeartbeat   = 30 * time.Second
	DefaultTaskTimeout = 5 * time.Minute
	DefaultMaxOutput   = 256 << 10
)

// Env is the contract between a flock-agent@ unit and its agent.
type Env struct {
	ID          int           // AGENT_ID
	Role        string        // AGENT_ROLE: orchestrator, worker or monitor; "" if unset
	NATSURL     string        // NATS_URL
	NKeyFile    string        // NATS_NKEY (flock's units), else $CREDENTIALS_DIRECTORY/nats: the user seed
	InboxPrefix string        // NATS_INBOX_PREFIX (for other clients; Connect uses wire.Inbox)
	SharedDir   string        // SHARED_DIR
	LogFile     string        // FLOCK_LOG_FILE; empty: log to stdout only
	Home        string        // HOME: where task commands run
	Heartbeat   time.Duration // FLOCK_HEARTBEAT
	TaskTimeout time.Duration // FLOCK_TASK_TIMEOUT
	MaxOutput   int           // FLOCK_MAX_OUTPUT, bytes of stdout+stderr kept per task
	JIT         bool          // FLOCK_JIT: the spec's jit, W+X memory allowed (Walls)
	// Extra are the variables beyond flock's own, "NAME=value": the
	// spec's env and the egress proxy's. FLOCK_ENV lists their names, so
	// a launcher hands a container exactly these.
	Extra []string
}

// ErrNotAnAgent means the process was not started by a flock unit.
var ErrNotAnAgent = errors.New("AGENT_ID is not set: flock-agent runs inside a flock-agent@ unit (flockctl provision starts it)")

// FromEnv reads Env from the process environment.
func FromEnv() (Env, error) { return envFrom(os.LookupEnv) }

// EnvOf reads Env from environ, "NAME=value" lines as Environ writes them
// and an agent's unit holds them (its Environment=), as FromEnv reads the
// process's: what a unit hands its agent, read back from the unit.
func EnvOf(environ []string) (Env, error) {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return envFrom(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
}

func envFrom(lookup func(string) (string, bool)) (Env, error) {
	get := func(k string) string { v, _ := lookup(k); return v }
	raw := get("AGENT_ID")
	if raw == "" {
		return Env{}, ErrNotAnAgent
	}
	id, err := strconv.Atoi(raw)
	if err != nil || id < 1 {
		return Env{}, fmt.Errorf("AGENT_ID=%q is not a positive number", raw)
	}
	e := Env{
		ID:          id,
		Role:        get("AGENT_ROLE"),
		NATSURL:     get("NATS_URL"),
		NKeyFile:    get("NATS_NKEY"),
		InboxPrefix: get("NATS_INBOX_PREFIX"),
		SharedDir:   get("SHARED_DIR"),
		LogFile:     get("FLOCK_LOG_FILE"),
		Home:        get("HOME"),
	}
	switch e.Role {
	case "", "orchestrator", "worker", "monitor":
	default:
		return Env{}, fmt.Errorf("AGENT_ROLE=%q: want orchestrator, worker or monitor", e.Role)
	}
	// flock's units name the seed in NATS_NKEY (the nats CLI reads it
	// too); a unit of one's own may load it with LoadCredential= instead.
	if dir := get("CREDENTIALS_DIRECTORY"); e.NKeyFile == "" && dir != "" {
		e.NKeyFile = filepath.Join(dir, "nats")
	}
	if e.Heartbeat, err = durationVar("FLOCK_HEARTBEAT", get("FLOCK_HEARTBEAT"), DefaultHeartbeat); err != nil {
		return Env{}, err
	}
	if e.TaskTimeout, err = durationVar("FLOCK_TASK_TIMEOUT", get("FLOCK_TASK_TIMEOUT"), DefaultTaskTimeout); err != nil {
		return Env{}, err
	}
	if e.MaxOutput, err = bytesVar("FLOCK_MAX_OUTPUT", get("FLOCK_MAX_OUTPUT"), DefaultMaxOutput); err != nil {
		return Env{}, err
	}
	switch jit := get("FLOCK_JIT"); jit {
	case "", "false":
	case "true":
		e.JIT = true
	default:
		return Env{}, fmt.Errorf("FLOCK_JIT=%q: want true or false", jit)
	}
	for _, name := range strings.Split(get("FLOCK_ENV"), ",") {
		if v, ok := lookup(name); ok {
			e.Extra = append(e.Extra, name+"="+v)
		}
	}
	return e, nil
}

// Environ is e as the agent's unit (Environment=) and its container carry
// it: every variable FromEnv reads, in one order, written by the one piece
// of code both sides share. FromEnv with exactly these set returns e.
func (e Env) Environ() []string {
	env := []string{
		"AGENT_ID=" + strconv.Itoa(e.ID),
		"AGENT_ROLE=" + e.Role,
		"NATS_URL=" + e.NATSURL,
		// A path, not the secret: any NATS client (the nats CLI reads
		// NATS_NKEY) connects with it and NATS_URL alone.
		"NATS_NKEY=" + e.NKeyFile,
		"NATS_INBOX_PREFIX=" + e.InboxPrefix,
		"SHARED_DIR=" + e.SharedDir,
		"FLOCK_LOG_FILE=" + e.LogFile,
		"FLOCK_HEARTBEAT=" + e.Heartbeat.String(),
		"FLOCK_TASK_TIMEOUT=" + e.TaskTimeout.String(),
		"FLOCK_MAX_OUTPUT=" + strconv.Itoa(e.MaxOutput),
		"FLOCK_JIT=" + strconv.FormatBool(e.JIT),
		"HOME=" + e.Home,
	}
	if len(e.Extra) == 0 {
		return env
	}
	names := make([]string, len(e.Extra))
	for i, kv := range e.Extra {
		names[i], _, _ = strings.Cut(kv, "=")
	}
	return append(append(env, "FLOCK_ENV="+strings.Join(names, ",")), e.Extra...)
}

func durationVar(name, raw string, def time.Duration) (time.Duration, error) {
	if raw == "" {
		return def, nil
	}
	d, err := time.ParseDuration(raw)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not a duration like 30s: %w", name, raw, err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%s=%q must be positive", name, raw)
	}
	return d, nil
}

func bytesVar(name, raw string, def int) (int, error) {
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q is not a positive number of bytes", name, raw)
	}
	return n, nil
}
