package plan

// Tier: unit (fakes).

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

const (
	githubFile  = "/etc/flock/secrets/github"
	githubToken = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	rotated     = "ghp_99C7e42F292c6912E7710c838347Ae178B4b"
	// searchSecret is a second secret of the flock.
	searchSecret = `  - name: search
    file: /etc/flock/secrets/search
    hosts: ["api.search.example:443"]
    inject: {query: key}
`
)

// proxyLines are p's lines of flock-proxy.service.
func proxyLines(p Plan) string {
	var out []string
	for _, l := range strings.SplitAfter(p.String(), "\n") {
		if strings.Contains(l, units.ProxyUnit) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// A running proxy whose unit file changes in its secrets alone (a file
// rotated, a secret granted) is handed them at a reload: installed, no
// restart. Anything else changed with them, or a proxy not running,
// restarts it as before.
func TestSecretsHandedOverOrRestarted(t *testing.T) {
	// Agent 1 may reach search's host, and is granted github alone.
	base := strings.NewReplacer("agents:\n", searchSecret+"agents:\n",
		"egress: [\"api.github.com:443\"]\n    secrets", "egress: [\"api.github.com:443\", \"api.search.example:443\"]\n    secrets").Replace(secretsSpec)
	runProxyCases(t, base, func(fk fakes) { fk.secrets.Secrets[githubFile] = []byte(githubToken + "\n") }, []proxyCase{
		{"a secret's file changed", func(fk fakes) (string, units.Options) {
			fk.secrets.Secrets[githubFile] = []byte(rotated + "\n")
			return base, units.Options{}
		}, `hand over        flock-proxy.service (a secret's file changed: it takes them at a reload)
install proxy    flock-proxy.service (a secret's file changed)
`},
		{"a new secret granted", func(fk fakes) (string, units.Options) {
			fk.secrets.Secrets["/etc/flock/secrets/search"] = []byte("se-0123456789\n")
			return strings.Replace(base, "secrets: [github]", "secrets: [github, search]", 1), units.Options{}
		}, `hand over        flock-proxy.service (a secret is granted or taken away: it takes them at a reload)
install proxy    flock-proxy.service (a secret is granted or taken away)
`},
		{"a secret's file and ExecStart changed", func(fk fakes) (string, units.Options) {
			fk.secrets.Secrets[githubFile] = []byte(rotated + "\n")
			return base, units.Options{FlockctlBin: "/opt/flock/flockctl"}
		}, `install proxy    flock-proxy.service (unit file missing, changed or not enabled)
(re)start proxy  flock-proxy.service (a secret's file changed: it reads them at start)
`},
		{"a secret's file changed, the proxy stopped", func(fk fakes) (string, units.Options) {
			fk.secrets.Secrets[githubFile] = []byte(rotated + "\n")
			fk.units.StopStatic(units.ProxyUnit)
			return base, units.Options{}
		}, `install proxy    flock-proxy.service (unit file missing, changed or not enabled)
(re)start proxy  flock-proxy.service (not running)
`},
	})
}

// proxyCase is a change to a provisioned flock (its spec, its units'
// options, the fakes' files) and the lines of the proxy's it wants in
// the next provision's plan.
type proxyCase struct {
	name   string
	change func(fk fakes) (spec string, uo units.Options)
	want   string
}

// runProxyCases provisions base, its files written by files, then each
// case's change: the plan's proxy's lines are its want, the proxy
// restarted as they say alone, and a second provision does nothing.
func runProxyCases(t *testing.T, base string, files func(fakes), cases []proxyCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, fk := newFakes()
			files(fk)
			provisionSecrets(t, h, mustParse(t, base))
			restarts := fk.units.Restarts(units.ProxyUnit)
			y, uo := tc.change(fk)
			p := provisionSecretsWith(t, h, mustParse(t, y), uo)
			if got := proxyLines(p); got != tc.want {
				t.Errorf("plan:\n%swant its proxy's lines:\n%s", p, tc.want)
			}
			wantRestarts := restarts + p.Count(StartProxy)
			if got := fk.units.Restarts(units.ProxyUnit); got != wantRestarts {
				t.Errorf("the proxy restarted %d times, want %d", got-restarts, wantRestarts-restarts)
			}
			if p := provisionSecretsWith(t, h, mustParse(t, y), uo); !p.Empty() {
				t.Errorf("provisioned again: %s; want nothing", p)
			}
		})
	}
}

// The hand-over: every granted secret's value, as the proxy reads it,
// written and then taken at a reload, the proxy not restarted. Not taken
// in time, or nowhere to write it: withdrawn, and the proxy restarted,
// saying why.
func TestHandOverAppliedOrRestarted(t *testing.T) {
	defer func(d time.Duration) { handOverWait = d }(handOverWait)
	handOverWait = 200 * time.Millisecond
	for _, tc := range []struct {
		name        string
		refuses     bool
		noDir       bool
		wantRestart bool
		wantSaid    string
	}{
		{"taken", false, false, false, ""},
		{"not taken", true, false, true, "it did not take secret-github within 200ms"},
		{"no hand-over directory", false, true, true, "hand-over directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, fk := newFakes()
			var said strings.Builder
			h.Say = func(format string, args ...any) { fmt.Fprintf(&said, format, args...) }
			fk.secrets.Secrets[githubFile] = []byte(githubToken + "\n")
			f := mustParse(t, secretsSpec)
			provisionSecrets(t, h, f)
			restarts, reloads := fk.units.Restarts(units.ProxyUnit), fk.units.Reloads(units.ProxyUnit)

			fk.secrets.Secrets[githubFile] = []byte("  " + rotated + "\n")
			fk.secrets.Refuses, fk.secrets.NoHandOverDir = tc.refuses, tc.noDir
			if p := provisionSecrets(t, h, f); p.Count(HandOverProxy) != 1 {
				t.Fatalf("plan: %s; want a hand-over", p)
			}
			restarted := fk.units.Restarts(units.ProxyUnit) - restarts
			switch {
			case tc.wantRestart && (restarted != 1 || len(fk.secrets.HandedOver) != 0 || !strings.Contains(said.String(), tc.wantSaid) || !strings.Contains(said.String(), "restarting it instead")):
				t.Errorf("restarted %d times, left %v, said %q; want it withdrawn, one restart, and why", restarted, fk.secrets.HandedOver, said.String())
			case !tc.wantRestart && (restarted != 0 || fk.units.Reloads(units.ProxyUnit) != reloads+1 || string(fk.secrets.Taken[spec.SecretCredential("github")]) != rotated || said.Len() != 0):
				t.Errorf("restarted %d times, reloaded %d, took %q, said %q; want the value taken at one reload", restarted, fk.units.Reloads(units.ProxyUnit)-reloads, fk.secrets.Taken, said.String())
			}
			if p := provisionSecrets(t, h, f); !p.Empty() {
				t.Errorf("provisioned again: %s; want nothing", p)
			}
		})
	}
}

// killedAt is units whose reload or restart (op) of one static unit is
// where provision was killed: the run's context ends there.
type killedAt struct {
	units.Manager
	op, name string
	kill     context.CancelFunc
}

func (k killedAt) ReloadService(ctx context.Context, name string) error {
	if k.op == "reload" && name == k.name {
		k.kill()
		return ctx.Err()
	}
	return k.Manager.ReloadService(ctx, name)
}

func (k killedAt) RestartService(ctx context.Context, name string) error {
	if k.op == "restart" && name == k.name {
		k.kill()
		return ctx.Err()
	}
	return k.Manager.RestartService(ctx, name)
}

// provisionKilled provisions f with uo on h, killed at op of name; the
// apply must fail.
func provisionKilled(t *testing.T, h Host, f *spec.Flock, uo units.Options, op, name string) {
	t.Helper()
	ctx, kill := context.WithCancel(context.Background())
	killed := h
	killed.Units = killedAt{h.Units, op, name, kill}
	var err error
	if uo.Placeholders, uo.SecretsDigest, err = DrawSecrets(ctx, h.Secrets, f, f.Agents, true); err != nil {
		t.Fatal(err)
	}
	d := Build(f, Site{}, uo)
	cur, err := Observe(ctx, h, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, killed, d, Diff(d, cur), nil); err == nil {
		t.Fatalf("apply killed at %s's %s: no error", name, op)
	}
}

// A provision killed while handing a rotated secret over leaves the
// proxy's unit file as it was, so the next run still sees the secret
// changed and hands it over: the proxy never stays on the old secret
// with a unit file that says it has the new one.
func TestHandOverKilledIsDoneAgain(t *testing.T) {
	h, fk := newFakes()
	fk.secrets.Secrets[githubFile] = []byte(githubToken + "\n")
	f := mustParse(t, secretsSpec)
	provisionSecrets(t, h, f)
	before, _ := fk.units.Service(context.Background(), units.ProxyUnit)

	fk.secrets.Secrets[githubFile] = []byte(rotated + "\n")
	provisionKilled(t, h, f, units.Options{}, "reload", units.ProxyUnit)
	if after, _ := fk.units.Service(context.Background(), units.ProxyUnit); string(after.File) != string(before.File) {
		t.Errorf("killed mid hand-over, the proxy's unit file changed:\n%s", after.File)
	}
	restarts := fk.units.Restarts(units.ProxyUnit)
	if p := provisionSecrets(t, h, f); p.Count(HandOverProxy) != 1 {
		t.Fatalf("the next run: %s; want the secret handed over again", p)
	}
	if got := string(fk.secrets.Taken[spec.SecretCredential("github")]); got != rotated || fk.units.Restarts(units.ProxyUnit) != restarts {
		t.Errorf("the proxy took %q and restarted %d times; want the rotated secret at a reload", got, fk.units.Restarts(units.ProxyUnit)-restarts)
	}
	if p := provisionSecrets(t, h, f); !p.Empty() {
		t.Errorf("provisioned again: %s; want nothing", p)
	}
}

// A provision killed after it installed a running static unit's changed
// file and before it restarted the unit leaves it running its former
// file under one that looks done: the next run still restarts it.
func TestARestartKilledIsDoneAgain(t *testing.T) {
	withMetrics := "bus:\n  metrics: 127.0.0.1:8223\n" + secretsSpec
	// (flock-counters.socket's restart is the proxy's, diffService's.)
	for _, name := range []string{units.BusUnit, units.ProxyUnit} {
		t.Run(name, func(t *testing.T) {
			h, fk := newFakes()
			fk.secrets.Secrets[githubFile] = []byte(githubToken + "\n")
			f := mustParse(t, withMetrics)
			provisionSecrets(t, h, f)
			restarts := fk.units.Restarts(name)

			// A new flockctl: every static unit's ExecStart changes.
			uo := units.Options{FlockctlBin: "/opt/flock/flockctl"}
			provisionKilled(t, h, f, uo, "restart", name)
			if st, _ := fk.units.Service(context.Background(), name); !strings.Contains(string(st.File), "/opt/flock/flockctl") || fk.units.Restarts(name) != restarts {
				t.Fatalf("killed: %s's file is not the new one, or it restarted:\n%s", name, st.File)
			}
			p := provisionSecretsWith(t, h, f, uo)
			if !strings.Contains(p.String(), name+" ("+restartOwed) || fk.units.Restarts(name) != restarts+1 {
				t.Errorf("the next run: %s; want %s restarted once, as owed", p, name)
			}
			if p := provisionSecretsWith(t, h, f, uo); !p.Empty() {
				t.Errorf("provisioned again: %s; want nothing", p)
			}
		})
	}
}
