package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/flockrun/flock/bus"
	"github.com/flockrun/flock/creds"
	"github.com/flockrun/flock/netpolicy"
	"github.com/flockrun/flock/plan"
	"github.com/flockrun/flock/proxy"
	"github.com/flockrun/flock/sandbox"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
	"github.com/flockrun/flock/users"
)

// preflight says in one sentence why this host cannot be changed, before
// anything is touched.
func preflight() error {
	if err := needRoot(); err != nil {
		return err
	}
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		comm, _ := os.ReadFile("/proc/1/comm")
		return fmt.Errorf("%w: PID 1 is %q, and flock runs every agent as a systemd unit; use a host booted with systemd",
			units.ErrNoSystemd, strings.TrimSpace(string(comm)))
	}
	return nil
}

// needRoot is preflight's first sentence: a verb that changes the host
// is root's.
func needRoot() error {
	if os.Geteuid() != 0 {
		return errors.New("flockctl must run as root: it creates users, systemd units and firewall rules (try sudo)")
	}
	return nil
}

// installed finds the programs the units run (flock-agent in every
// agent's, flockctl serve in flock.service), so a missing install is one
// sentence here and not failed start jobs.
func installed() (units.Programs, error) {
	self, _ := os.Executable() // "" when unknown: the first install found
	return units.FindPrograms(self, units.InstallDirs)
}

// runtimesFor checks that the agents' levels can run here: each level's
// runtime on the host and each rootfs a directory, before anything is
// changed. agents are this host's (another host's need not run here).
func runtimesFor(agents []spec.Agent, rt sandbox.Runtimes) error {
	for _, a := range agents {
		if err := rt.Ready(a.Level, a.Rootfs); err != nil {
			return fmt.Errorf("agent %d: %w", a.ID, err)
		}
	}
	return nil
}

// openHost connects to the host's OS boundaries. close releases them.
// secret (a multi-host flock's) derives the agents' seeds.
func openHost(ctx context.Context, secret []byte) (h plan.Host, uo units.Options, close func(), err error) {
	if err := preflight(); err != nil {
		return h, uo, nil, err
	}
	m, uo, err := connectUnits(ctx, units.Connect)
	if err != nil {
		return h, uo, nil, err
	}
	b := bus.NewSystem()
	b.Secret = secret
	h = plan.Host{Users: users.NewHost(), Units: m, Firewall: netpolicy.New(), Bus: b, Proxy: proxy.NewSystem(), Secrets: creds.NewMaterialStore()}
	return h, uo, m.Close, nil
}

// connectUnits connects to systemd with connect and reads how this host
// makes its agents' units.
func connectUnits(ctx context.Context, connect func(context.Context) (*units.Systemd, error)) (*units.Systemd, units.Options, error) {
	m, err := connect(ctx)
	if err != nil {
		return nil, units.Options{}, err
	}
	uo, err := unitOptions(ctx, m)
	if err != nil {
		m.Close()
		return nil, uo, err
	}
	return m, uo, nil
}

// unitOptions is how this host makes its agents' units: its systemd, the
// installed programs and their builds, its runtimes.
func unitOptions(ctx context.Context, m *units.Systemd) (uo units.Options, err error) {
	if uo.SystemdVersion, err = m.Version(ctx); err != nil {
		return uo, err
	}
	// Not installed: the units' defaults, and unknown builds ("");
	// installed() says so where it matters.
	if p, err := installed(); err == nil {
		uo.AgentBin, uo.FlockctlBin = p.Agent, p.Flockctl
	}
	uo.AgentBuild, _ = units.BuildID(cmp.Or(uo.AgentBin, units.DefaultAgentBin))
	uo.FlockctlBuild, _ = units.BuildID(cmp.Or(uo.FlockctlBin, units.DefaultFlockctlBin))
	uo.Runtimes = sandbox.HostRuntimes()
	return uo, nil
}

// onHost is a flock on this host: the host's boundaries, what the flock
// asks of them, and once observed what they have and the plan between:
// what provision applies, reconcile re-applies, status shows, and explain
// and audit hold the live host against.
type onHost struct {
	host  plan.Host
	opts  units.Options
	want  plan.Desired
	have  plan.Current
	plan  plan.Plan
	close func()
}

// setUp opens this host for f (w: which of f's hosts it is) and builds
// what f asks of it; with observe it also reads what the host has and
// plans between. It changes nothing.
func setUp(ctx context.Context, f *spec.Flock, w where, observe bool) (*onHost, error) {
	h, uo, closeHost, err := openHost(ctx, w.secret)
	if err != nil {
		return nil, err
	}
	// What the units and the proxy hold of the secrets and the model
	// APIs' keys, drawn as root.
	if uo.Placeholders, uo.SecretsDigest, err = plan.DrawSecrets(ctx, h.Secrets, f, f.On(w.site.Host), w.makeKey); err == nil {
		uo.ModelsDigest, err = plan.DrawModels(ctx, h.Secrets, f, f.On(w.site.Host), w.makeKey)
	}
	if err != nil {
		closeHost()
		return nil, fmt.Errorf("the secrets' placeholder key: %w", err)
	}
	s := &onHost{host: h, opts: uo, want: plan.Build(f, w.site, uo), close: closeHost}
	if !observe {
		return s, nil
	}
	if s.have, err = plan.Observe(ctx, h, s.want); err != nil {
		closeHost()
		return nil, err
	}
	s.plan = plan.Diff(s.want, s.have)
	return s, nil
}

// setUpInstalled is setUp, observed, of f on the host the installed bus
// config records (else the one whose address this machine has): what
// status shows and reconcile re-applies (makeKey: reconcile's).
func setUpInstalled(ctx context.Context, f *spec.Flock, makeKey bool) (*onHost, error) {
	w, err := whereFor(f, "", true)
	if err != nil {
		return nil, err
	}
	w.makeKey = makeKey
	return setUp(ctx, f, w, true)
}

// loadFlock reads the spec from -f, or makes one from --agents N.
func loadFlock(file string, count int) (*spec.Flock, error) {
	switch {
	case file != "" && count > 0:
		return nil, errors.New("give either -f FILE or --agents N, not both")
	case file != "":
		return spec.Load(file)
	case count > 0:
		return spec.Count(count)
	}
	return nil, errors.New("no spec: give -f FILE (see examples/flock.yaml) or --agents N")
}

// appliedFlock is the last provisioned flock, for verbs without a spec.
func appliedFlock() (*spec.Flock, error) {
	f, err := plan.LoadState(plan.StatePath)
	if errors.Is(err, plan.ErrNoState) {
		return nil, fmt.Errorf("%w (%s is absent); run flockctl provision first", err, plan.StatePath)
	}
	return f, err
}
