package units

import (
	"errors"
	"fmt"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/spec"
)

// KilledBy names the wall of flock's that likely killed agent a from how
// its main process last ended alone, without its journal: the system call
// filter's SIGSYS, or a JIT's SIGTRAP or SIGSEGV under
// MemoryDenyWriteExecute (Diagnose's cases that need no log). flockctl
// events reads a with the spec, /metrics from the agent's unit
// (agentOfUnit).
func KilledBy(a spec.Agent, e Exit) (Diagnosis, bool) {
	return Diagnose(a, Status{ActiveState: "failed", LastExit: e}, "")
}

// mayBeWall says whether an exit could be a wall's: a signal, or a
// runtime's 128+n for one. Only then are a unit's ExecStart and
// Environment read (usage.go), so a scrape of healthy agents costs no more.
func mayBeWall(e Exit) bool {
	return e.Code == "killed" || e.Code == "dumped" || e.Code == "exited" && e.Status > 128
}

// agentOfUnit reads back from an agent's unit what KilledBy needs of its
// spec, with the readers of what ForAgent wrote: its id and jit from
// Environment (agent.EnvOf), its level from ExecStart
// (sandbox.ReadUnitArgs). Each value is as ForAgent set it (the fake) or
// as D-Bus decodes it (systemd).
func agentOfUnit(execStart, environment any) (spec.Agent, error) {
	environ, ok := environment.([]string)
	if !ok {
		return spec.Agent{}, fmt.Errorf("Environment is %T, not a list", environment)
	}
	env, err := agent.EnvOf(environ)
	if err != nil {
		return spec.Agent{}, fmt.Errorf("Environment: %w", err)
	}
	argv, err := mainArgv(execStart)
	if err != nil {
		return spec.Agent{}, err
	}
	args, err := agent.ParseUnitArgs(argv[1:])
	if err != nil {
		return spec.Agent{}, err
	}
	l, _, err := sandbox.ReadUnitArgs(args)
	if err != nil {
		return spec.Agent{}, err
	}
	return spec.Agent{ID: env.ID, JIT: env.JIT, Level: l.Level}, nil
}

// mainArgv is the argv of a unit's one ExecStart command.
func mainArgv(execStart any) ([]string, error) {
	var argv []string
	switch v := execStart.(type) {
	case []ExecCommand: // as planned
		if len(v) == 1 {
			argv = v[0].Argv
		}
	case [][]any: // a(sasbttttuii), as D-Bus decodes it
		if len(v) == 1 && len(v[0]) > 1 {
			argv, _ = v[0][1].([]string)
		}
	}
	if len(argv) == 0 {
		return nil, errors.New("ExecStart is not one command with its argv")
	}
	return argv, nil
}
