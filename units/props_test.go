package units

// Tier: unit (no root).

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockrun/flock/internal/golden"
	"github.com/flockrun/flock/spec"
)

func parse(t *testing.T, yaml string) *spec.Flock {
	t.Helper()
	f, err := spec.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const goldenSpec = `secrets:
  - name: github
    file: /etc/flock/secrets/github
    hosts: ["api.github.com:443", "github.com:443"]
    inject: {basic: {user: x-access-token}}
    env: [GH_TOKEN, GITHUB_TOKEN]
providers:
  - {name: anthropic, kind: anthropic, url: "https://api.anthropic.com", key_file: /etc/flock/keys/anthropic}
  - {name: corp, kind: anthropic, url: "https://llm.corp.example", key_file: /etc/flock/keys/corp}
  - {name: ollama, kind: openai, url: "http://127.0.0.1:11434/v1"}
agents:
  - id: 3
    role: worker
    command: ["/usr/bin/python3", "agent.py", "$HOME is not expanded"]
    limits: {memory: 512M, cpu: 150%, tasks: 64}
    common: rw
  - id: 4
  - id: 5
    role: orchestrator
    exec: ["/usr/local/bin/planner", "--loop"]
    heartbeat: 5s
  - id: 6
    level: podman
    rootfs: /var/lib/flock-rootfs/debian
    exec: ["/usr/bin/python3", "agent.py"]
  - id: 7
    level: gvisor
    rootfs: /var/lib/flock-rootfs/debian
    common: rw
  - id: 8
    level: podman
    image: localhost/agent:latest
  - id: 9
    exec: ["/usr/bin/node", "agent.js"]
    jit: true
  - id: 10
    level: podman
    rootfs: /var/lib/flock-rootfs/node
    exec: ["/usr/bin/node", "agent.js"]
    jit: true
  - id: 11
    egress: ["api.example.com:443", "*.githubusercontent.com:443", "10.1.2.3:443"]
    env: {NODE_EXTRA_CA_CERTS: /etc/ssl/certs/internal-ca.pem, LOG_LEVEL: debug}
  - id: 12
    command: ["/usr/local/bin/claude", "-p"]
    jit: true
    models:
      anthropic: {requests_per_minute: 60, tokens_per_day: 2M}
      corp: {}
      ollama: {concurrent: 2}
  - id: 13
    egress: ["api.github.com:443", "github.com:443"]
    secrets: [github]
  - id: 14
    level: gvisor
    rootfs: /var/lib/flock-rootfs/debian
    egress: ["api.github.com:443", "github.com:443"]
    secrets: [github]
`

// goldenPlaceholders are agent 13's; agent 14's are not drawn (its
// unit holds PlaceholderUnknown).
var goldenPlaceholders = map[int]map[string]string{13: {"github": "ghp_Xq3vTb0LmW9ZcKd2RpYs7NfHu4JaE1GoIt6e"}}

// The property set of each level, as a reviewer reads it. Any change to
// an agent's hardening shows in the diff of these files.
func TestPropertiesGolden(t *testing.T) {
	f := parse(t, goldenSpec)
	for _, tc := range []struct {
		file    string
		id      int
		version int
	}{
		{"agent-3-systemd252.golden", 3, 252},
		{"agent-4-systemd252.golden", 4, 252},
		{"agent-4-systemd254.golden", 4, 254},
		{"agent-5-systemd252.golden", 5, 252},
		{"agent-6-podman-systemd252.golden", 6, 252},
		{"agent-7-gvisor-systemd252.golden", 7, 252},
		{"agent-8-podman-image-systemd252.golden", 8, 252},
		{"agent-9-jit-systemd252.golden", 9, 252},
		{"agent-10-podman-jit-systemd252.golden", 10, 252},
		{"agent-11-names-systemd252.golden", 11, 252},
		{"agent-12-models-systemd252.golden", 12, 252},
		// Granted a secret: its placeholder, and the bundle to trust
		// (bound into the container at level gvisor).
		{"agent-13-secrets-systemd252.golden", 13, 252},
		{"agent-14-gvisor-secrets-systemd252.golden", 14, 252},
	} {
		t.Run(tc.file, func(t *testing.T) {
			a, _ := f.Agent(tc.id)
			golden.Check(t, filepath.Join("testdata", tc.file), Render(ForAgent(f, a, Options{SystemdVersion: tc.version, Placeholders: goldenPlaceholders})))
		})
	}
}

// flock.service as a reviewer reads it.
func TestBusServiceGolden(t *testing.T) {
	golden.Check(t, filepath.Join("testdata", "flock.service.golden"), string(BusService("", "0123456789ab", "/etc/flock/bus.json")))
	golden.Check(t, filepath.Join("testdata", "flock-proxy.service.golden"), string(ProxyService("", "0123456789ab", "/etc/flock/proxy.json", "/var/lib/flock/creds/proxy.nk", ProxySecrets{})))
	// With model APIs: their keys and CA as credentials of this unit
	// alone, and the digest whose change hands them over.
	golden.Check(t, filepath.Join("testdata", "flock-proxy-models.service.golden"), string(ProxyService("", "0123456789ab", "/etc/flock/proxy.json", "/var/lib/flock/creds/proxy.nk",
		ProxySecrets{ModelsDigest: "ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100"},
		[2]string{"model-key-anthropic", "/etc/flock/keys/anthropic"}, [2]string{"model-ca-corp", "/etc/flock/keys/corp-ca.pem"}, [2]string{"model-key-corp", "/etc/flock/keys/corp"})))
	// With secrets: their files and the CA as credentials, and the
	// digest whose change hands them over.
	golden.Check(t, filepath.Join("testdata", "flock-proxy-secrets.service.golden"), string(ProxyService("", "0123456789ab", "/etc/flock/proxy.json", "/var/lib/flock/creds/proxy.nk",
		ProxySecrets{Creds: [][2]string{{"secret-github", "/etc/flock/secrets/github"}, {"secrets-ca", "/var/lib/flock/secrets/ca.pem"}}, Digest: "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"})))
	// A multi-host flock's: the same, and the cluster's files as credentials.
	golden.Check(t, filepath.Join("testdata", "flock-cluster.service.golden"), string(BusService("", "0123456789ab", "/etc/flock/bus.json",
		"/etc/flock/cluster/ca.crt", "/etc/flock/cluster/host.crt", "/etc/flock/cluster/host.key", "/etc/flock/cluster/route.password")))
	// The firewall counters' reader for /metrics, and its socket.
	golden.Check(t, filepath.Join("testdata", "flock-counters.socket.golden"), string(CountersSocketUnit()))
	golden.Check(t, filepath.Join("testdata", "flock-counters@.service.golden"), string(CountersService("")))
}

// One agent's unit depends on its own entry only: adding, removing or
// changing another agent leaves its hash (and so its process) alone.
func TestUnitDependsOnlyOnItsAgent(t *testing.T) {
	base := parse(t, "agents: [{id: 1}, {id: 2}]\n")
	a1, _ := base.Agent(1)
	want := ForAgent(base, a1, Options{}).Hash
	for name, yaml := range map[string]string{
		"agent added":         "agents: [{id: 1}, {id: 2}, {id: 3}]\n",
		"agent removed":       "agents: [{id: 1}]\n",
		"other agent changed": "agents: [{id: 1}, {id: 2, limits: {memory: 1G}, common: rw}]\n",
	} {
		f := parse(t, yaml)
		a, _ := f.Agent(1)
		if got := ForAgent(f, a, Options{}).Hash; got != want {
			t.Errorf("%s: agent 1's hash %s -> %s", name, want, got)
		}
	}
	for name, yaml := range map[string]string{
		"memory":  "agents: [{id: 1, limits: {memory: 128M}}, {id: 2}]\n",
		"cpu":     "agents: [{id: 1, limits: {cpu: 20%}}, {id: 2}]\n",
		"tasks":   "agents: [{id: 1, limits: {tasks: 10}}, {id: 2}]\n",
		"command": "agents: [{id: 1, command: [/bin/sleep, infinity]}, {id: 2}]\n",
		"common":  "agents: [{id: 1, common: rw}, {id: 2}]\n",
		"root":    "root: /opt/flock\nagents: [{id: 1}, {id: 2}]\n",
		"bus":     "bus: {listen: 127.0.0.1:4333}\nagents: [{id: 1}, {id: 2}]\n",
	} {
		f := parse(t, yaml)
		a, _ := f.Agent(1)
		if got := ForAgent(f, a, Options{}).Hash; got == want {
			t.Errorf("changing agent 1's %s left its hash at %s", name, got)
		}
	}
}

func TestDescriptionCarriesHashAndLabel(t *testing.T) {
	f := parse(t, "agents: [{id: 7}]\n")
	u := ForAgent(f, f.Agents[0], Options{})
	if HashFromDescription(u.Description) != u.Hash || len(u.Hash) != 12 {
		t.Errorf("description %q, hash %q", u.Description, u.Hash)
	}
	if !strings.Contains(u.Description, "process isolation with guardrails") {
		t.Errorf("description %q lacks the honest label", u.Description)
	}
	if HashFromDescription("some other unit") != "" {
		t.Error("a foreign description yields a hash")
	}
}

// A new flock-agent restarts every agent (its build is part of the unit's
// hash); the same build, nothing. BuildID reads a real binary's note.
func TestAgentBuildIsPartOfTheUnit(t *testing.T) {
	f := parse(t, "agents: [{id: 1}]\n")
	a, _ := f.Agent(1)
	old, same, next := ForAgent(f, a, Options{AgentBuild: "aaaa"}), ForAgent(f, a, Options{AgentBuild: "aaaa"}), ForAgent(f, a, Options{AgentBuild: "bbbb"})
	if old.Hash != same.Hash || old.Hash == next.Hash {
		t.Errorf("hashes: %s, same build %s, new build %s", old.Hash, same.Hash, next.Hash)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	id1, err1 := BuildID(self)
	id2, err2 := BuildID(self)
	if err1 != nil || err2 != nil || id1 == "" || id1 != id2 {
		t.Errorf("BuildID of the test binary: %q %v, %q %v", id1, err1, id2, err2)
	}
	if _, err := BuildID("testdata/flock.service.golden"); err == nil {
		t.Error("BuildID of a text file succeeded")
	}
}
