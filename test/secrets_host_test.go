package test

// Tier: root + nspawn. The host's side of secrets on one booted systemd
// machine: provision refuses a secret file others may read and changes
// nothing; an agent granted the secret holds a placeholder and the
// bundle, one without the grant neither; the secret is in no unit,
// environment, file or journal an agent can read; a rotated secret is
// handed to the running flock-proxy at a reload, nothing restarted, and
// so is a model API's rotated key; deprovision --all --purge removes the
// material.

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/flockrun/flock/test/harness"
)

const (
	githubSecretFile = "/etc/flock/secrets/github"
	secretValue      = "ghp_R4nd0mT0kenF0rTheH0stS1deTestXyzW9"
	secretRotate     = "ghp_H9re5tP9ctaP4rHgwP8rpM2huEqmxAvyC2" // of secretValue's shape: the same placeholder
	secretsHost      = `secrets:
  - name: github
    file: ` + githubSecretFile + `
    hosts: ["api.github.com:443"]
    env: [GH_TOKEN, GITHUB_TOKEN]
agents:
  - id: 1
    egress: ["api.github.com:443"]
    secrets: [github]
  - id: 2
    egress: ["api.github.com:443"]
`
	modelKeyFile    = "/etc/flock/keys/anthropic"
	modelKey        = "sk-ant-api03-HostSideTestKey0123456789"
	modelKeyRotated = "sk-ant-api03-HostSideTestKey9876543210"
)

// secretsModelsHost is secretsHost with agent 1 granted a model API.
var secretsModelsHost = `providers:
  - {name: anthropic, kind: anthropic, url: "https://api.anthropic.com", key_file: ` + modelKeyFile + `}
` + strings.Replace(secretsHost, "    secrets: [github]\n", "    secrets: [github]\n    models: {anthropic: {}}\n", 1)

func TestSecretsHostSide(t *testing.T) {
	// Tier: root + nspawn.
	m := harness.Boot(t)
	mustRun(t, m, "install", "-d", "-m", "0700", "/etc/flock/secrets")
	writeSecret := func(v string, mode uint32) {
		t.Helper()
		if err := m.WriteFile(githubSecretFile, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		mustRun(t, m, "chmod", fmt.Sprintf("%04o", mode), githubSecretFile)
	}

	t.Run("a secret file others may read is refused, and nothing changes", func(t *testing.T) {
		writeSecret(secretValue, 0o644)
		writeSpec(t, m, secretsHost)
		_, stderr, err := run(t, m, "flockctl", "provision", "-f", specPath)
		want := specPath + ": secrets[0].file: " + githubSecretFile + " is readable or writable by others (mode 0644)"
		if err == nil || !strings.Contains(stderr, want) {
			t.Errorf("provision with a readable secret: %v\n%s\nwant %q", err, stderr, want)
		}
		out, _, _ := run(t, m, "sh", "-c", "ls -d /etc/flock/proxy.json /var/lib/flock/secrets /etc/flock/ca-bundle.crt 2>&1; systemctl list-units --no-legend 'flock*'")
		if strings.Count(out, "No such file") != 3 || strings.Contains(out, "flock-agent@") {
			t.Errorf("a refused provision changed the host:\n%s", out)
		}
	})

	writeSecret(secretValue, 0o600)
	provision(t, m, secretsHost)
	waitActive(t, m, 1, 2)

	t.Run("the granted agent holds a placeholder and the bundle, the other neither", func(t *testing.T) {
		env1, env2 := unitProp(t, m, 1, "Environment"), unitProp(t, m, 2, "Environment")
		placeholder := envValue(env1, "GH_TOKEN")
		switch {
		case len(placeholder) != len(secretValue) || !strings.HasPrefix(placeholder, "ghp_") || placeholder == secretValue:
			t.Errorf("agent 1's GH_TOKEN %q is not a placeholder shaped as the secret", placeholder)
		case envValue(env1, "GITHUB_TOKEN") != placeholder:
			t.Errorf("agent 1's GITHUB_TOKEN is not its placeholder:\n%s", env1)
		case envValue(env1, "SSL_CERT_FILE") != "/etc/flock/ca-bundle.crt" || envValue(env1, "GIT_SSL_CAINFO") != "/etc/flock/ca-bundle.crt":
			t.Errorf("agent 1 is not pointed at the bundle:\n%s", env1)
		case strings.Contains(env2, "GH_TOKEN") || strings.Contains(env2, "SSL_CERT_FILE"):
			t.Errorf("agent 2, granted nothing, holds them:\n%s", env2)
		}
		modes := mustRun(t, m, "stat", "-c", "%n %a %U", "/var/lib/flock/secrets", "/var/lib/flock/secrets/ca.pem",
			"/var/lib/flock/secrets/placeholder.key", "/etc/flock/ca.crt", "/etc/flock/ca-bundle.crt")
		for _, want := range []string{"/var/lib/flock/secrets 700 root", "ca.pem 600 root", "placeholder.key 600 root", "/etc/flock/ca.crt 644 root", "ca-bundle.crt 644 root"} {
			if !strings.Contains(modes, want) {
				t.Errorf("the material: want %q in\n%s", want, modes)
			}
		}
		bundle, _ := m.ReadFile("/etc/flock/ca-bundle.crt")
		roots, _ := m.ReadFile("/etc/ssl/certs/ca-certificates.crt")
		cert, _ := m.ReadFile("/etc/flock/ca.crt")
		if !bytes.HasPrefix(bundle, bytes.TrimRight(roots, "\n")) || !bytes.HasSuffix(bundle, cert) {
			t.Error("the bundle is not the system's roots followed by the CA's certificate")
		}
		unit := mustRun(t, m, "cat", "/etc/systemd/system/flock-proxy.service")
		if !strings.Contains(unit, "LoadCredential=secret-github:"+githubSecretFile) || !strings.Contains(unit, "LoadCredential=secrets-ca:/var/lib/flock/secrets/ca.pem") {
			t.Errorf("flock-proxy.service is not handed the secret and the CA:\n%s", unit)
		}
	})

	t.Run("the secret is in no unit, environment, file or journal an agent can read", func(t *testing.T) {
		assertSecretNowhere(t, m, secretValue)
	})

	t.Run("a rotated secret is handed to flock-proxy at a reload, nothing restarted", func(t *testing.T) {
		before := unitRuns(t, m, 1, 2)
		proxyBefore := proxyRun(t, m)
		placeholder := envValue(unitProp(t, m, 1, "Environment"), "GH_TOKEN")
		writeSecret(secretRotate, 0o600)
		writeSpec(t, m, secretsHost)
		provisionHandsOver(t, m, "a secret's file changed", before, proxyBefore)
		if journal := mustRun(t, m, "journalctl", "--no-pager", "-o", "cat", "-u", "flock-proxy.service"); !strings.Contains(journal, "reloaded /etc/flock/proxy.json") {
			t.Errorf("flock-proxy did not say it reloaded:\n%s", journal)
		}
		if got := envValue(unitProp(t, m, 1, "Environment"), "GH_TOKEN"); got != placeholder {
			t.Errorf("the placeholder moved from %q to %q for a secret of the same shape", placeholder, got)
		}
		assertSecretNowhere(t, m, secretRotate)
	})

	t.Run("a model API's rotated key is handed to flock-proxy at a reload, nothing restarted", func(t *testing.T) {
		mustRun(t, m, "install", "-d", "-m", "0700", "/etc/flock/keys")
		writeKey := func(v string) {
			t.Helper()
			if err := m.WriteFile(modelKeyFile, []byte(v+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			mustRun(t, m, "chmod", "0600", modelKeyFile)
		}
		writeKey(modelKey)
		// Agent 1 granted the model API: it and flock-proxy restart once.
		provision(t, m, secretsModelsHost)
		waitActive(t, m, 1, 2)
		unit := mustRun(t, m, "cat", "/etc/systemd/system/flock-proxy.service")
		if !strings.Contains(unit, "\n# models ") || !strings.Contains(unit, "LoadCredential=model-key-anthropic:"+modelKeyFile) {
			t.Errorf("flock-proxy.service is not handed the key and its digest:\n%s", unit)
		}
		before := unitRuns(t, m, 1, 2)
		proxyBefore := proxyRun(t, m)
		writeKey(modelKeyRotated)
		provisionHandsOver(t, m, "a model API's key or CA changed", before, proxyBefore)
		assertSecretNowhere(t, m, modelKeyRotated)
	})

	t.Run("the material is made again when deleted", func(t *testing.T) {
		mustRun(t, m, "rm", "/etc/flock/ca-bundle.crt")
		out := mustRun(t, m, "flockctl", "provision", "-f", specPath)
		if !strings.Contains(out, "ensure secrets") || strings.Contains(out, "restart unit") {
			t.Errorf("provision after the bundle was deleted:\n%s", out)
		}
		mustRun(t, m, "test", "-s", "/etc/flock/ca-bundle.crt")
	})

	t.Run("deprovision --all --purge removes the material, not the operator's secret", func(t *testing.T) {
		mustRun(t, m, "flockctl", "deprovision", "--all", "--purge", "--yes")
		out, _, _ := run(t, m, "sh", "-c", "ls -d /var/lib/flock/secrets /etc/flock/ca.crt /etc/flock/ca-bundle.crt "+githubSecretFile+" 2>&1")
		if strings.Count(out, "No such file") != 3 || !strings.Contains(out, githubSecretFile+"\n") {
			t.Errorf("after deprovision --all --purge:\n%s", out)
		}
	})
}

// assertSecretNowhere looks for secret where an agent could read it: the
// units' properties (any user may ask systemd), the granted agent's
// process environment, every file its uid may read under the places it
// sees, and the journal.
func assertSecretNowhere(t *testing.T, m *harness.Machine, secret string) {
	t.Helper()
	if out := mustRun(t, m, "systemctl", "show", "flock-agent@*.service", "flock-proxy.service"); !strings.Contains(out, "Id="+unitName(1)) || strings.Contains(out, secret) {
		t.Error("a unit's properties hold the secret, or agent 1's were not shown")
	}
	pid := unitProp(t, m, 1, "MainPID")
	if env, _ := m.ReadFile("/proc/" + pid + "/environ"); bytes.Contains(env, []byte(secret)) {
		t.Error("agent 1's process environment holds the secret")
	}
	uid := strings.TrimSpace(mustRun(t, m, "id", "-u", "flock-1"))
	// grep exits 1 when it finds nothing: only what it prints counts. The
	// machine's / is an overlay of the test host's, so its /var/tmp holds
	// the harness's own machines and VMs (their disks included), which
	// are not the flock's host.
	found, _, _ := run(t, m, "setpriv", "--reuid="+uid, "--regid="+uid, "--clear-groups", "--",
		"grep", "-rlsF", "--devices=skip", "--exclude-dir=flock-harness", "--exclude-dir=flock-vm", secret,
		"/etc", "/srv", "/run", "/tmp", "/var/tmp", "/var/lib", "/var/log", "/home")
	if strings.TrimSpace(found) != "" {
		t.Errorf("agent 1's uid reads the secret in:\n%s", found)
	}
	if journal, _, _ := run(t, m, "journalctl", "--no-pager", "-o", "cat"); strings.Contains(journal, secret) {
		t.Error("the journal holds the secret")
	}
}

// provisionHandsOver provisions the spec as written and wants flock-proxy
// handed what changed (why, as the plan says it) at a reload: no agent
// restarted (before: their runs), nor flock-proxy (proxyBefore), which
// would cut its tunnels and streams; nothing left in the hand-over
// directory; and nothing to do at the next provision.
func provisionHandsOver(t *testing.T, m *harness.Machine, why string, before map[int]unitRun, proxyBefore string) {
	t.Helper()
	out := mustRun(t, m, "flockctl", "provision", "-f", specPath)
	if !strings.Contains(out, "hand over        flock-proxy.service ("+why) || strings.Contains(out, "restarting it instead") {
		t.Errorf("provision did not hand it over (%s):\n%s", why, out)
	}
	if after := unitRuns(t, m, 1, 2); after[1] != before[1] || after[2] != before[2] {
		t.Errorf("an agent restarted: before %+v, after %+v", before, after)
	}
	if now := proxyRun(t, m); now != proxyBefore {
		t.Errorf("flock-proxy restarted (%q, was %q): its tunnels and streams were cut", now, proxyBefore)
	}
	if left := mustRun(t, m, "find", "/run/flock-proxy/handover", "-mindepth", "1"); strings.TrimSpace(left) != "" {
		t.Errorf("the hand-over left files behind:\n%s", left)
	}
	if out := mustRun(t, m, "flockctl", "provision", "-f", specPath); !strings.Contains(out, "nothing to do") {
		t.Errorf("provision again: %s", out)
	}
}

// proxyRun tells one run of flock-proxy from the next.
func proxyRun(t *testing.T, m *harness.Machine) string {
	t.Helper()
	return mustRun(t, m, "systemctl", "show", "-p", "ActiveEnterTimestampMonotonic", "-p", "MainPID", "flock-proxy.service")
}

// envValue is NAME's value in a unit's Environment= as systemctl shows it.
func envValue(env, name string) string {
	for _, kv := range strings.Fields(env) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}
