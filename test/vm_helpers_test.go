package test

// Helpers of the VM tier (tests named TestVM*): flock_test.go's verbs on a
// *harness.VM, whose commands are ssh round trips to an emulated guest, so
// their bounds are longer.

import (
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/flockrun/flock/test/harness"
)

func vmProvision(t testing.TB, v *harness.VM, spec string) {
	t.Helper()
	if err := v.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatalf("write spec: %v", err)
	}
	mustRun(t, v, "flockctl", "provision", "-f", specPath)
}

// vmStatus is `flockctl status --output json`, its agents well or not,
// or its error.
func vmStatus(t testing.TB, v *harness.VM) ([]agentStatus, error) {
	t.Helper()
	out, _, _, err := runStatus(t, v, "--output", "json")
	if err != nil {
		return nil, err
	}
	var st []agentStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return nil, fmt.Errorf("flockctl status --output json: %w\n%s", err, out)
	}
	return st, nil
}

// allActive says why st is not exactly the agents ids, all active.
func allActive(st []agentStatus, ids ...int) error {
	var got []int
	for _, a := range st {
		if a.State != "active" {
			return fmt.Errorf("agent %d (%s) is %q", a.ID, a.Unit, a.State)
		}
		got = append(got, a.ID)
	}
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		return fmt.Errorf("agents %v, want %v", got, ids)
	}
	return nil
}

func vmWaitActive(t testing.TB, v *harness.VM, timeout time.Duration, ids ...int) []agentStatus {
	t.Helper()
	var st []agentStatus
	v.Eventually(t, timeout, func() error {
		var err error
		if st, err = vmStatus(t, v); err != nil {
			return err
		}
		return allActive(st, ids...)
	})
	return st
}

// vmProps reads properties of a unit with systemctl show.
func vmProps(t testing.TB, v runner, unit string, props ...string) map[string]string {
	t.Helper()
	argv := []string{"systemctl", "show", unit}
	for _, p := range props {
		argv = append(argv, "-p", p)
	}
	return parseProps(mustRun(t, v, argv...))
}

// percentile is the p-th percentile (0..100) of xs, nearest rank.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}
