package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"

	"github.com/flockrun/flock/units"
)

// wallGroups sort the properties of an agent's unit into what systemd
// must set up for each at start; a property in none is left out of every
// group but "all" (the command, environment, limits, restart policy).
var wallGroups = []struct {
	Name, What string
	Props      []string
}{
	{"files", "the file system: read-only system and home, the agents' tmpfs with its own directory bound back, its credential, inaccessible paths",
		[]string{"ProtectSystem", "ProtectHome", "TemporaryFileSystem", "BindPaths", "BindReadOnlyPaths", "ReadWritePaths", "InaccessiblePaths"}},
	{"private", "private /tmp, devices, IPC and user namespace",
		[]string{"PrivateTmp", "PrivateDevices", "PrivateIPC", "PrivateUsers", "RemoveIPC"}},
	{"proc", "ProtectProc=invisible", []string{"ProtectProc"}},
	{"kernel", "the kernel's tunables, modules, logs, cgroups, clock and hostname read-only",
		[]string{"ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups", "ProtectClock", "ProtectHostname"}},
	{"syscalls", "the system call filter, address families, namespaces, W^X, no new privileges, no capabilities",
		[]string{"SystemCallFilter", "SystemCallErrorNumber", "SystemCallArchitectures", "RestrictAddressFamilies", "RestrictNamespaces",
			"MemoryDenyWriteExecute", "LockPersonality", "RestrictRealtime", "RestrictSUIDSGID", "NoNewPrivileges",
			"CapabilityBoundingSet", "AmbientCapabilities", "KeyringMode"}},
}

// unitOwn are the properties every measured unit has: who it runs as,
// never the agent's command (a sleep stands in, so only the set-up is
// measured).
var unitOwn = []string{"User", "Group", "SupplementaryGroups"}

// wallsCost starts, reps times each, a unit as agent id's user with
// nothing ("bare"), with each group of the walls of id's planned unit,
// and with all of them, and prints one JSON object: group → systemd's
// own set-up time of each start in ms (InactiveExitTimestamp to
// ActiveEnterTimestamp, which for Type=exec is when the command was
// exec'd: the namespaces, mounts and filters are in place).
func wallsCost(ctx context.Context, file, rawID, rawReps string) error {
	planned, err := agentUnit(file, rawID)
	if err != nil {
		return err
	}
	reps, err := strconv.Atoi(rawReps)
	if err != nil {
		return fmt.Errorf("repetitions: %w", err)
	}
	conn, err := sd.NewSystemdConnectionContext(ctx)
	if err != nil {
		return fmt.Errorf("systemd: %w", err)
	}
	defer conn.Close()

	pick := func(names []string) []units.Property {
		ps := []units.Property{{Name: "Type", Value: "exec"},
			{Name: "ExecStart", Value: []units.ExecCommand{{Path: "/bin/sleep", Argv: []string{"/bin/sleep", "infinity"}}}}}
		for _, p := range planned.Properties {
			if slices.Contains(unitOwn, p.Name) || slices.Contains(names, p.Name) {
				ps = append(ps, p)
			}
		}
		return ps
	}
	sets := []struct {
		name  string
		props []units.Property
	}{{"bare", pick(nil)}}
	var all []string
	for _, g := range wallGroups {
		sets = append(sets, struct {
			name  string
			props []units.Property
		}{g.Name, pick(g.Props)})
		all = append(all, g.Props...)
	}
	sets = append(sets, struct {
		name  string
		props []units.Property
	}{"all", pick(all)})

	out := map[string][]float64{}
	for range reps {
		for _, s := range sets { // interleaved: a slow moment hits every set alike
			ms, err := setupTime(ctx, conn, units.Unit{Name: "flock-floor-walls.service", Properties: s.props})
			if err != nil {
				return fmt.Errorf("walls %s: %w", s.name, err)
			}
			out[s.name] = append(out[s.name], ms)
		}
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// setupTime starts u, reads systemd's timestamps of its start, and stops
// it, waiting until it is collected so the next start is a fresh one.
func setupTime(ctx context.Context, conn *sd.Conn, u units.Unit) (float64, error) {
	if err := startUnit(ctx, conn, u); err != nil {
		return 0, err
	}
	props, err := conn.GetUnitPropertiesContext(ctx, u.Name)
	if err != nil {
		return 0, err
	}
	exit, _ := props["InactiveExitTimestampMonotonic"].(uint64)
	active, _ := props["ActiveEnterTimestampMonotonic"].(uint64)
	done := make(chan string, 1)
	if _, err := conn.StopUnitContext(ctx, u.Name, "replace", done); err != nil {
		return 0, err
	}
	<-done
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		us, err := conn.ListUnitsByNamesContext(ctx, []string{u.Name})
		if err == nil && (len(us) == 0 || us[0].LoadState == "not-found") {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s not collected after 30 s", u.Name)
		}
	}
	if exit == 0 || active < exit {
		return 0, fmt.Errorf("%s: no start timestamps (inactive exit %d, active enter %d)", u.Name, exit, active)
	}
	return float64(active-exit) / 1000, nil
}
