package plan

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

// Progress is told how many unit starts are done out of total.
type Progress func(done, total int)

// parallelStarts bounds concurrent unit jobs: systemd serialises them
// anyway, but pipelining hides the D-Bus round trips.
const parallelStarts = 8

// step is one stage of an apply: the kinds of change it carries out and
// how, given all of a plan's changes of those kinds at once.
type step struct {
	kinds []Kind
	run   func(ctx context.Context, x applier, cs []Change) error
}

// steps is the apply order, written once: Diff sorts a plan by it and
// Apply runs a plan's changes in it. Stop what goes before its user,
// identity and firewall rules go; start no agent before its user, dirs,
// bus identity, the bus itself and its rules exist; rules go in before
// any new agent runs, and after removed ones stopped.
var steps = []step{
	{[]Kind{StopUnit}, stopUnits},
	{[]Kind{RemoveUser}, removeUsers},
	{[]Kind{RemoveIdentity}, removeIdentities},
	{[]Kind{CreateUser}, createUsers},
	// Before the paths: the readers' are handed to it.
	{[]Kind{CreateGroup}, createReaders},
	// Before the paths: an agent's seed is one of them, handed to its uid.
	{[]Kind{CreateIdentity}, createIdentities},
	{[]Kind{EnsurePath}, ensurePaths},
	{[]Kind{WriteBusConfig}, writeBusConfig},
	{[]Kind{InstallBus}, installBus},
	{[]Kind{StartBus}, startBus},
	{[]Kind{ReloadBus}, reloadBus},
	// After the bus: its socket is the bus's account's.
	{[]Kind{InstallCounters}, installCounters},
	{[]Kind{StartCounters}, startCounters},
	{[]Kind{RemoveCounters}, removeCounters},
	// The proxy's CA before the proxy, which is handed it; the bundle
	// before an agent that trusts it starts.
	{[]Kind{EnsureSecrets}, ensureSecrets},
	// The proxy is up before an agent that needs it starts.
	{[]Kind{WriteProxyConf}, writeProxyConfig},
	// Before the unit's file, whose digest says what the proxy has: a
	// run killed between the two finds it still differing and hands the
	// secrets over again.
	{[]Kind{HandOverProxy}, handOverProxy},
	{[]Kind{InstallProxy}, installProxy},
	{[]Kind{StartProxy}, startProxy},
	{[]Kind{ReloadProxy}, reloadProxy},
	{[]Kind{RemoveProxy}, removeProxy},
	{[]Kind{Firewall}, replaceFirewall},
	// One step, so new and changed agents start in parallel together.
	{[]Kind{StartUnit, RestartUnit}, startUnits},
}

// rank is k's step in the apply order.
func rank(k Kind) int {
	for i, s := range steps {
		if slices.Contains(s.kinds, k) {
			return i
		}
	}
	panic(fmt.Sprintf("plan: change kind %q has no step", k))
}

// applier is what every step works with.
type applier struct {
	h        Host
	say      func(format string, args ...any)
	d        Desired
	plan     Plan
	progress Progress
}

// Apply carries out p on h, walking its changes in their order: each run
// of changes of one step is handed to that step at once. A plan out of
// the apply order (not made by Diff) is refused before anything changes.
func Apply(ctx context.Context, h Host, d Desired, p Plan, progress Progress) error {
	for i := 1; i < len(p.Changes); i++ {
		if rank(p.Changes[i].Kind) < rank(p.Changes[i-1].Kind) {
			return fmt.Errorf("plan: %s %s comes after %s %s, against the apply order",
				p.Changes[i].Kind, p.Changes[i].Target, p.Changes[i-1].Kind, p.Changes[i-1].Target)
		}
	}
	x := applier{h: h, d: d, plan: p, progress: progress, say: h.Say}
	if x.say == nil {
		x.say = func(string, ...any) {}
	}
	for start := 0; start < len(p.Changes); {
		r := rank(p.Changes[start].Kind)
		end := start + 1
		for end < len(p.Changes) && rank(p.Changes[end].Kind) == r {
			end++
		}
		if err := steps[r].run(ctx, x, p.Changes[start:end]); err != nil {
			return &ApplyError{Done: Plan{p.Changes[:start]}, Failed: Plan{p.Changes[start:end]}, Left: Plan{p.Changes[end:]}, Err: err}
		}
		start = end
	}
	return nil
}

// ApplyError is an apply that stopped part-way: the host has what Done
// did, part or none of Failed, and nothing of Left. The next provision
// plans from what the host has, so it converges once the cause is fixed.
type ApplyError struct {
	Done, Failed, Left Plan
	Err                error
}

func (e *ApplyError) Error() string { return e.Err.Error() }
func (e *ApplyError) Unwrap() error { return e.Err }

// Report says in words where the host stands: what was done, what failed,
// what was not begun, and what to do. The error itself is Error's.
func (e *ApplyError) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "stopped at: %s\n", counts(e.Failed))
	if !e.Done.Empty() {
		fmt.Fprintf(&b, "done before it: %s\n", counts(e.Done))
	}
	if !e.Left.Empty() {
		fmt.Fprintf(&b, "not begun: %s\n", counts(e.Left))
	}
	if n := e.Failed.Count(StartUnit) + e.Failed.Count(RestartUnit) + e.Left.Count(StartUnit) + e.Left.Count(RestartUnit); n > 0 {
		fmt.Fprintf(&b, "%d agents may not be running as the spec says (flockctl status shows which).\n", n)
	}
	b.WriteString("Fix the cause and run the same provision again: it plans from what the host has now and completes the rest.\n")
	return b.String()
}

// counts is p as "3 create user, 1 write bus config".
func counts(p Plan) string {
	var parts []string
	for start := 0; start < len(p.Changes); {
		end := start + 1
		for end < len(p.Changes) && p.Changes[end].Kind == p.Changes[start].Kind {
			end++
		}
		parts = append(parts, fmt.Sprintf("%d %s", end-start, p.Changes[start].Kind))
		start = end
	}
	return strings.Join(parts, ", ")
}

func targets(cs []Change) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Target
	}
	return out
}

func stopUnits(ctx context.Context, x applier, cs []Change) error {
	return stopAll(ctx, x.h.Units, targets(cs))
}

func removeUsers(ctx context.Context, x applier, cs []Change) error {
	if err := x.h.Users.RemoveAccounts(ctx, targets(cs)); err != nil {
		return fmt.Errorf("removing users: %w", err)
	}
	return nil
}

func removeIdentities(ctx context.Context, x applier, cs []Change) error {
	if err := x.h.Bus.Remove(ctx, targets(cs)); err != nil {
		return fmt.Errorf("removing bus identities: %w", err)
	}
	return nil
}

// createUsers writes every account: sysusers applies the whole set.
func createUsers(ctx context.Context, x applier, _ []Change) error {
	if err := x.h.Users.EnsureAccounts(ctx, x.d.Shared, x.d.Accounts); err != nil {
		return fmt.Errorf("creating users: %w", err)
	}
	return nil
}

func createReaders(ctx context.Context, x applier, _ []Change) error {
	if _, err := x.h.Users.EnsureReaders(ctx); err != nil {
		return fmt.Errorf("creating group %s: %w", spec.ReadersGroup, err)
	}
	return nil
}

func ensurePaths(ctx context.Context, x applier, _ []Change) error {
	gid, ok, err := x.h.Users.Readers(ctx)
	if err != nil {
		return fmt.Errorf("preparing directories: reading group %s: %w", spec.ReadersGroup, err)
	}
	if !ok {
		return fmt.Errorf("preparing directories: group %s is missing; provision again", spec.ReadersGroup)
	}
	if err := x.h.Users.EnsurePaths(ctx, x.d.PathsWith(&gid)); err != nil {
		return fmt.Errorf("preparing directories: %w", err)
	}
	return nil
}

func createIdentities(ctx context.Context, x applier, cs []Change) error {
	for _, c := range cs {
		if _, _, err := x.h.Bus.Ensure(ctx, c.Target); err != nil {
			return fmt.Errorf("bus identity %s: %w", c.Target, err)
		}
	}
	return nil
}

func installBus(ctx context.Context, x applier, _ []Change) error {
	return install(ctx, x, units.BusUnit, x.d.Service, x.plan.Count(StartBus) > 0)
}

// install installs a static unit's file; when the plan restarts the
// running unit onto it, the restart is marked owed first, so a run
// killed between the two leaves the next one the restart to do
// (units.ServiceStatus.RestartOwed).
func install(ctx context.Context, x applier, name string, file []byte, restarts bool) error {
	if restarts {
		if st, err := x.h.Units.ActiveState(ctx, name); err == nil && st == "active" {
			if err := x.h.Units.OweRestart(ctx, name); err != nil {
				return err
			}
		}
	}
	if err := x.h.Units.InstallService(ctx, name, file); err != nil {
		return fmt.Errorf("installing %s: %w", name, err)
	}
	return nil
}

func startBus(ctx context.Context, x applier, _ []Change) error {
	if err := x.h.Units.RestartService(ctx, units.BusUnit); err != nil {
		return fmt.Errorf("starting the bus: %w", err)
	}
	return nil
}

func reloadBus(ctx context.Context, x applier, _ []Change) error {
	if err := x.h.Bus.Reload(ctx); err != nil {
		return fmt.Errorf("reloading the bus: %w", err)
	}
	return nil
}

// installCounters writes the template before the socket that starts it.
func installCounters(ctx context.Context, x applier, _ []Change) error {
	if err := install(ctx, x, units.CountersTemplate, x.d.CountersService, false); err != nil {
		return err
	}
	return install(ctx, x, units.CountersSocket, x.d.CountersSocket, x.plan.Count(StartCounters) > 0)
}

func startCounters(ctx context.Context, x applier, _ []Change) error {
	if err := x.h.Units.RestartService(ctx, units.CountersSocket); err != nil {
		return fmt.Errorf("starting %s: %w", units.CountersSocket, err)
	}
	return nil
}

func removeCounters(ctx context.Context, x applier, _ []Change) error {
	return removeCountersFrom(ctx, x.h)
}

// removeCountersFrom removes the socket first: nothing starts a reader
// once it is gone.
func removeCountersFrom(ctx context.Context, h Host) error {
	for _, name := range []string{units.CountersSocket, units.CountersTemplate} {
		if err := h.Units.RemoveService(ctx, name); err != nil {
			return fmt.Errorf("removing %s: %w", name, err)
		}
	}
	return nil
}

func ensureSecrets(ctx context.Context, x applier, _ []Change) error {
	if x.h.Secrets == nil {
		return fmt.Errorf("making the secrets' material: this host has no access to it")
	}
	if err := x.h.Secrets.Ensure(ctx); err != nil {
		return fmt.Errorf("making the secrets' material: %w", err)
	}
	return nil
}

func writeProxyConfig(ctx context.Context, x applier, _ []Change) error {
	if err := x.h.Proxy.WriteConfig(ctx, x.d.ProxyConfig); err != nil {
		return fmt.Errorf("writing the proxy config: %w", err)
	}
	return nil
}

func installProxy(ctx context.Context, x applier, _ []Change) error {
	return install(ctx, x, units.ProxyUnit, x.d.ProxyService, x.plan.Count(StartProxy) > 0)
}

func startProxy(ctx context.Context, x applier, _ []Change) error {
	if err := x.h.Units.RestartService(ctx, units.ProxyUnit); err != nil {
		return fmt.Errorf("starting the proxy: %w", err)
	}
	return nil
}

func reloadProxy(ctx context.Context, x applier, _ []Change) error {
	if err := x.h.Units.ReloadService(ctx, units.ProxyUnit); err != nil {
		return fmt.Errorf("reloading the proxy: %w", err)
	}
	return nil
}

func removeProxy(ctx context.Context, x applier, _ []Change) error {
	return removeProxyFrom(ctx, x.h)
}

func removeProxyFrom(ctx context.Context, h Host) error {
	if err := h.Units.RemoveService(ctx, units.ProxyUnit); err != nil {
		return fmt.Errorf("removing %s: %w", units.ProxyUnit, err)
	}
	return h.Proxy.RemoveConfig(ctx)
}

func replaceFirewall(ctx context.Context, x applier, _ []Change) error {
	if err := x.h.Firewall.Ensure(ctx, x.d.Policy); err != nil {
		return fmt.Errorf("replacing table inet flock: %w", err)
	}
	return nil
}

func startUnits(ctx context.Context, x applier, cs []Change) error {
	byName := map[string]units.Unit{}
	for _, u := range x.d.Units {
		byName[u.Name] = u
	}
	us := make([]units.Unit, len(cs))
	for i, c := range cs {
		us[i] = byName[c.Target]
	}
	return startAll(ctx, x.h.Units, us, x.progress)
}

// writeBusConfig writes the bus config with the keys of every identity
// the flock needs (Ensure makes one missing, and reads the others).
func writeBusConfig(ctx context.Context, x applier, _ []Change) error {
	h, d := x.h, x.d
	keys := map[string]string{}
	for _, name := range d.Identities {
		pub, _, err := h.Bus.Ensure(ctx, name)
		if err != nil {
			return fmt.Errorf("bus identity %s: %w", name, err)
		}
		keys[name] = pub
	}
	if err := h.Bus.WriteConfig(ctx, d.BusConfig(keys)); err != nil {
		return fmt.Errorf("writing the bus config: %w", err)
	}
	return nil
}

func startAll(ctx context.Context, m units.Manager, us []units.Unit, progress Progress) error {
	return inParallel(len(us), func(i int) error {
		if err := m.Start(ctx, us[i]); err != nil {
			return fmt.Errorf("starting %s: %w", us[i].Name, err)
		}
		return nil
	}, progress, "units failed to start")
}

// stopAll stops the named units, parallelStarts at a time.
func stopAll(ctx context.Context, m units.Manager, names []string) error {
	return inParallel(len(names), func(i int) error {
		if err := m.Stop(ctx, names[i]); err != nil {
			return fmt.Errorf("stopping %s: %w", names[i], err)
		}
		return nil
	}, nil, "units failed to stop")
}

// inParallel runs do(0..n-1), parallelStarts at a time, telling progress
// as each ends, and joins the errors: a few of them, enough to see the
// cause (a thousand would bury it), and how many more there were.
func inParallel(n int, do func(i int) error, progress Progress, more string) error {
	var (
		mu   sync.Mutex
		done int
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, parallelStarts)
	)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			err := do(i)
			mu.Lock()
			defer mu.Unlock()
			done++
			if err != nil {
				errs = append(errs, err)
			}
			if progress != nil {
				progress(done, n)
			}
		}()
	}
	wg.Wait()
	const shown = 5
	if len(errs) > shown {
		errs = append(errs[:shown], fmt.Errorf("and %d more %s", len(errs)-shown, more))
	}
	return errors.Join(errs...)
}
