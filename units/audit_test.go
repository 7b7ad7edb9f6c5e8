package units

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/flockrun/flock/agent"
	"github.com/flockrun/flock/spec"
)

// The audit's unit is the agent's: only the command, the name, the
// restart policy, the runtime directory and the output differ.
func TestForAuditIsTheAgentsUnit(t *testing.T) {
	f, err := spec.Parse([]byte("agents:\n  - id: 1\n    exec: [\"/bin/x\"]\n  - id: 2\n    level: podman\n    rootfs: /r\n"))
	if err != nil {
		t.Fatal(err)
	}
	differ := map[string]bool{"ExecStart": true, "Restart": true, "RestartUSec": true, "RestartSteps": true,
		"RestartMaxDelayUSec": true, "StartLimitIntervalUSec": true, "RuntimeDirectory": true, "StandardOutputFile": true, "StandardError": true}
	for _, a := range f.Agents {
		own, au := ForAgent(f, a, Options{SystemdVersion: 254}), ForAudit(f, a, Options{SystemdVersion: 254}, []byte(`{"requests":[]}`), "/run/flock-audit/x.json")
		if au.Name != AuditUnit(a.ID) || !strings.HasPrefix(au.Name, AuditPrefix) {
			t.Errorf("agent %d: audit unit %q", a.ID, au.Name)
		}
		props := map[string]any{}
		for _, p := range au.Properties {
			props[p.Name] = p.Value
		}
		same := func(ps []Property) (out []Property) {
			for _, p := range ps {
				if !differ[p.Name] {
					out = append(out, p)
				}
			}
			return out
		}
		if !reflect.DeepEqual(same(own.Properties), same(au.Properties)) {
			t.Errorf("agent %d: the audit's unit differs from the agent's:\n%v\n%v", a.ID, same(au.Properties), same(own.Properties))
		}
		for _, p := range own.Properties {
			if strings.HasPrefix(p.Name, "Restart") && props[p.Name] != nil {
				t.Errorf("agent %d: the audit's unit has %s", a.ID, p.Name)
			}
		}
		argv := props["ExecStart"].([]ExecCommand)[0].Argv
		args, err := agent.ParseUnitArgs(argv[1:])
		if err != nil {
			t.Fatal(err)
		}
		joined := strings.Join(args, " ")
		if !strings.HasSuffix(joined, `probe {"requests":[]}`) || (a.Level.Contained() != strings.Contains(joined, "--suffix=-audit")) {
			t.Errorf("agent %d: the audit runs %q", a.ID, args)
		}
		if props["StandardOutputFile"] != "/run/flock-audit/x.json" {
			t.Errorf("agent %d: output %v", a.ID, props["StandardOutputFile"])
		}
	}
}

// The colluding peer's unit runs beside the agent's own audit unit: its
// own name, container and runtime directory.
func TestForAuditPeerHasItsOwnName(t *testing.T) {
	f, err := spec.Parse([]byte("agents:\n  - id: 2\n    level: podman\n    rootfs: /r\n"))
	if err != nil {
		t.Fatal(err)
	}
	a := f.Agents[0]
	au := ForAudit(f, a, Options{SystemdVersion: 254}, []byte(`{}`), "/x")
	pu := ForAuditPeer(f, a, Options{SystemdVersion: 254}, []byte(`{}`), "/x")
	if pu.Name == au.Name || pu.Name != AuditPeerUnit(2) || !strings.HasPrefix(pu.Name, AuditPrefix) {
		t.Errorf("peer unit %q beside audit unit %q", pu.Name, au.Name)
	}
	props := map[string]any{}
	for _, p := range pu.Properties {
		props[p.Name] = p.Value
	}
	argv := strings.Join(props["ExecStart"].([]ExecCommand)[0].Argv, " ")
	if !strings.Contains(argv, "-peer") || strings.Contains(argv, "-audit") {
		t.Errorf("peer unit's container: %s", argv)
	}
	if rd := props["RuntimeDirectory"]; !reflect.DeepEqual(rd, []string{"flock-sandbox/2-peer"}) {
		t.Errorf("peer unit's runtime directory %v", rd)
	}
}

// AsLive takes the walls systemd reports as set, where they differ from
// the plan; the system call filter as one wall; never the audit's own
// settings or mounts.
func TestAsLive(t *testing.T) {
	f, err := spec.Parse([]byte("agents:\n  - id: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	au := ForAudit(f, f.Agents[0], Options{SystemdVersion: 254}, []byte(`{"requests":[]}`), "/run/flock-audit/1.json")
	planned := map[string]any{}
	for _, p := range au.Properties {
		planned[p.Name] = p.Value
	}
	expanded := []any{true, []string{"read", "write", "landlock_create_ruleset"}} // as systemd reports @system-service
	noFilter := []any{false, []string{}}
	for _, tc := range []struct {
		name string
		live map[string]any
		took []string
		want map[string]any // taken values whose Go form is not as reported
	}{
		{"as planned", planned, nil, nil},
		{"nothing reported", map[string]any{}, nil, nil},
		{"a flock unit as D-Bus reports it", map[string]any{
			"SystemCallFilter": expanded, "SystemCallErrorNumber": int32(1), "SystemCallArchitectures": []string{"native"},
			"RestrictAddressFamilies": []any{true, []string{"AF_UNIX", "AF_INET", "AF_INET6"}}, "ProtectSystem": "strict",
		}, nil, nil},
		{"a unit started by hand", map[string]any{
			"ProtectSystem": "no", "NoNewPrivileges": false, "CapabilityBoundingSet": ^uint64(0),
			"UMask": uint32(0o022), "ReadWritePaths": []string{}, "User": "flock-1",
			"SystemCallFilter": noFilter, "SystemCallErrorNumber": int32(2147483646), "SystemCallArchitectures": []string{},
			"RestrictAddressFamilies": []any{false, []string{}},
		}, []string{"UMask", "ProtectSystem", "ReadWritePaths", "NoNewPrivileges", "CapabilityBoundingSet",
			"SystemCallArchitectures", "SystemCallErrorNumber", "RestrictAddressFamilies", "SystemCallFilter"},
			map[string]any{"ProtectSystem": "no", "UMask": FileMode(0o022), "SystemCallFilter": NameList{false, []string{}},
				"SystemCallErrorNumber": int32(2147483646), "RestrictAddressFamilies": NameList{false, []string{}}}},
		{"the filter's errno alone changed", map[string]any{
			"SystemCallFilter": expanded, "SystemCallErrorNumber": int32(13), "SystemCallArchitectures": []string{"native"},
		}, []string{"SystemCallErrorNumber", "SystemCallFilter"},
			map[string]any{"SystemCallErrorNumber": int32(13), "SystemCallFilter": NameList{true, expanded[1].([]string)}}},
		{"the audit's own settings are never taken", map[string]any{
			"ExecStart": "x", "Environment": []string{"A=1"}, "RuntimeDirectory": []string{"x"},
			"StandardOutputFile": "/tmp/x", "Type": "simple",
		}, nil, nil},
		{"mounts stay planned", map[string]any{
			"BindReadOnlyPaths": [][]any{{"/x", "/y", false, uint64(0)}}, "TemporaryFileSystem": [][]any{},
		}, nil, nil},
		{"a different type is not taken", map[string]any{"ProtectSystem": true, "MemoryMax": int64(5)}, nil, nil},
	} {
		out, took := AsLive(au, tc.live)
		if !reflect.DeepEqual(took, tc.took) {
			t.Errorf("%s: took %v, want %v", tc.name, took, tc.took)
		}
		filters := 0
		for _, p := range out.Properties {
			if p.Name == "SystemCallFilter" {
				filters++
			}
			want, taken := tc.want[p.Name]
			if !taken && slices.Contains(took, p.Name) {
				want, taken = tc.live[p.Name], true // taken as reported
			}
			if !taken {
				want = planned[p.Name]
				if p.Name == "SystemCallFilter" {
					continue // two planned; counted below
				}
			}
			if !reflect.DeepEqual(p.Value, want) {
				t.Errorf("%s: %s = %#v, want %#v", tc.name, p.Name, p.Value, want)
			}
		}
		if wantFilters := map[bool]int{true: 1, false: 2}[slices.Contains(took, "SystemCallFilter")]; filters != wantFilters {
			t.Errorf("%s: %d SystemCallFilter properties, want %d", tc.name, filters, wantFilters)
		}
		if len(tc.took) == 0 && !reflect.DeepEqual(out.Properties, au.Properties) {
			t.Errorf("%s: nothing taken, but the unit changed", tc.name)
		}
	}

	// A container level plans no filter of the unit's own (the runtime
	// filters): systemd reporting none is no drift.
	c, err := spec.Parse([]byte("agents:\n  - id: 2\n    level: podman\n    rootfs: /r\n"))
	if err != nil {
		t.Fatal(err)
	}
	cu := ForAudit(c, c.Agents[0], Options{SystemdVersion: 254}, []byte(`{"requests":[]}`), "/run/flock-audit/2.json")
	if _, took := AsLive(cu, map[string]any{"SystemCallFilter": noFilter, "SystemCallErrorNumber": int32(2147483646)}); took != nil {
		t.Errorf("level podman, no filter planned or in force: took %v", took)
	}
}
