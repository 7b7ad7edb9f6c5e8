// Package agent is the agent's side of flock: what a unit hands an agent
// (its id, the bus address, the shared directory, its log file), structured
// logging to the journal and the log file, and the Landlock scope that keeps
// an agent's abstract UNIX sockets and signals to itself.
package agent

import (
	"errors"
	"fmt"
	"os"
	"strconv"
)

// Env is the contract between a flock-agent@ unit and its agent.
type Env struct {
	ID        int    // AGENT_ID
	NATSURL   string // NATS_URL
	SharedDir string // SHARED_DIR
	LogFile   string // FLOCK_LOG_FILE; empty: log to stdout only
}

// ErrNotAnAgent means the process was not started by a flock unit.
var ErrNotAnAgent = errors.New("AGENT_ID is not set: flock-agent runs inside a flock-agent@ unit (flockctl provision starts it)")

// FromEnv reads Env from the process environment.
func FromEnv() (Env, error) {
	raw := os.Getenv("AGENT_ID")
	if raw == "" {
		return Env{}, ErrNotAnAgent
	}
	id, err := strconv.Atoi(raw)
	if err != nil || id < 1 {
		return Env{}, fmt.Errorf("AGENT_ID=%q is not a positive number", raw)
	}
	return Env{
		ID:        id,
		NATSURL:   os.Getenv("NATS_URL"),
		SharedDir: os.Getenv("SHARED_DIR"),
		LogFile:   os.Getenv("FLOCK_LOG_FILE"),
	}, nil
}
