package plan

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flockrun/flock/gateway"
	"github.com/flockrun/flock/spec"
	"github.com/flockrun/flock/units"
)

// handOverWait is how long the proxy has to take what it is handed at
// its reload (it removes each file once its new config is in force).
var handOverWait = 10 * time.Second

// handOverProxy hands the running proxy every granted secret and every
// model API's key and CA, and reloads it: its tunnels and streams go on.
// Anything in the way (no hand-over directory, the proxy not running,
// not taking them in time) withdraws what was handed over and restarts
// it instead, on its new unit file, as a rotated file did before, saying
// why. The unit file is installed after (InstallProxy): until then its
// digests say the proxy has not taken them.
func handOverProxy(ctx context.Context, x applier, cs []Change) error {
	err := handOver(ctx, x)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("handing the credentials to %s: %w", units.ProxyUnit, err)
	}
	x.say("%s: the credentials were not handed over (%v); restarting it instead\n", units.ProxyUnit, err)
	// It reads them at start from the new unit file's credentials.
	if err := install(ctx, x, units.ProxyUnit, x.d.ProxyService, true); err != nil {
		return err
	}
	return startProxy(ctx, x, cs)
}

func handOver(ctx context.Context, x applier) error {
	m := x.h.Secrets
	if m == nil {
		return errors.New("this host has no access to the secrets' material")
	}
	if st, err := x.h.Units.ActiveState(ctx, units.ProxyUnit); err != nil || st != "active" {
		return fmt.Errorf("it is not running (%s)", cmpErr(st, err))
	}
	// Read as the proxy reads them at start: a value it takes is the one
	// a restart would give it.
	values, err := modelValues(ctx, m, gateway.ForFlock(x.d.Flock, x.d.Agents).Credentials())
	if err != nil {
		return err
	}
	for _, s := range GrantedSecrets(x.d.Flock, x.d.Agents) {
		v, err := secretValue(ctx, m, s)
		if err != nil {
			return err
		}
		values[spec.SecretCredential(s.Name)] = v
	}
	names := sortedKeys(values)
	if err := m.HandOver(ctx, values); err != nil {
		return err
	}
	err = x.h.Units.ReloadService(ctx, units.ProxyUnit)
	if err == nil {
		err = waitTaken(ctx, x, names)
	}
	if err != nil {
		return errors.Join(err, m.Withdraw(context.WithoutCancel(ctx), names))
	}
	return nil
}

// waitTaken polls until the proxy has taken names, for handOverWait.
func waitTaken(ctx context.Context, x applier, names []string) error {
	deadline := time.Now().Add(handOverWait)
	for {
		left, err := x.h.Secrets.Untaken(ctx, names)
		switch {
		case err != nil:
			return err
		case len(left) == 0:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("it did not take %s within %s (its journal says why)", strings.Join(left, ", "), handOverWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func cmpErr(state string, err error) string {
	if err != nil {
		return err.Error()
	}
	return state
}
