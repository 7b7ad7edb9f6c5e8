package units

import (
	"reflect"
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
