package test

// Tier: root + nspawn, with git, gh, curl, CPython's requests and Node
// (harness.SecretsTier; undici from the npm registry). Secrets proven
// with the clients agents run, from inside a real unit: git clones and
// pushes, gh calls GitHub's API, Python's requests and Node's fetch call
// a REST API, each to a stand-in outside the machine that wants the real
// secret (probe secrets-serve, its certificate from a test CA among the
// system's roots, as a public CA's is); the agent holds placeholders
// alone. Then what is refused: a request outside the rules, a
// placeholder toward a host its secret is not bound to, another agent
// with a placeholder it read; and the secret in no unit, environment,
// file or journal an agent can read. The same from inside agents at
// level podman and gvisor (curl and Node's fetch in a root file system of
// their own), and from a Claude Code worker whose Bash tool commits and
// pushes (its model the gateway's stand-in, which has Bash run the task's
// command).

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/audit"
	"github.com/flockrun/flock/test/harness"
	"github.com/flockrun/flock/test/standin"
)

const (
	restSecretFile = "/etc/flock/secrets/rest"
	restSecret     = "sr_live_5fQz8kW2mN4pR7tV1xY3bC6dG9hJ0"
	restRotated    = "sr_live_8kRt2wQ7xN1mV5pZ3cY9bF4dH6jL2" // of restSecret's shape: the same placeholder
	secretsUpAddr  = "192.0.2.20"                            // the stand-ins, in tlsUpstream's namespace
	secretsCADir   = "/etc/flock-test-secrets-ca"
	secretsGitRoot = "/var/lib/flock-test/git"
	secretsRepo    = secretsGitRoot + "/acme/repo.git"
	nodeClientDir  = "/opt/flock-node-agent" // examples/node-agent, for its undici
	secretsRootfs  = "/var/lib/flock-test/secrets-rootfs"
)

// secretsSpec: agent 1 is a shell worker (the task is its script, run in
// its unit) granted both secrets, reaching their hosts and one bound to
// neither; agent 2 a shell worker reaching the same hosts, granted none;
// agents 3 and 4 shell workers at level podman and gvisor granted rest;
// agent 5 Claude Code granted github, its model the stand-in's.
// github is a GitHub token for git (Basic auth) and gh (an Enterprise
// host: GH_HOST); rest a REST API's bearer token, with rules.
const secretsSpec = `defaults:
  heartbeat: 2s
providers:
  - {name: anthropic, kind: anthropic, url: "https://` + modelUpName + `", key_file: /etc/flock/keys/anthropic, ca_file: ` + modelCADir + `/ca.pem}
secrets:
  - name: github
    file: ` + githubSecretFile + `
    hosts: ["git.flock.test:443", "gh.flock.test:443"]
    env: [GH_TOKEN, GH_ENTERPRISE_TOKEN]
    rules:
      allow: [{path: /acme}, {methods: [GET], path: /api/v3/user}]
  - name: rest
    file: ` + restSecretFile + `
    hosts: ["rest.flock.test:443"]
    env: [REST_TOKEN]
    rules:
      allow: [{methods: [GET, POST], path: /v1}]
      deny: [{path: /v1/admin}]
agents:
  - id: 1
    command: ["/bin/sh", "-c", "exec /bin/sh -ec \"$(cat)\" </dev/null 2>&1"]
    jit: true
    egress: ["git.flock.test:443", "gh.flock.test:443", "rest.flock.test:443", "elsewhere.flock.test:443"]
    secrets: [github, rest]
    env: {GH_HOST: gh.flock.test, GH_NO_UPDATE_NOTIFIER: "1", GH_PROMPT_DISABLED: "1"}
  - id: 2
    command: ["/bin/sh", "-c", "exec /bin/sh -ec \"$(cat)\" </dev/null 2>&1"]
    egress: ["git.flock.test:443", "rest.flock.test:443"]
  - id: 3
    level: podman
    rootfs: ` + secretsRootfs + `
    jit: true
    command: ["/bin/sh", "-c", "exec /bin/sh -ec \"$(cat)\" </dev/null 2>&1"]
    egress: ["rest.flock.test:443"]
    secrets: [rest]
  - id: 4
    level: gvisor
    rootfs: ` + secretsRootfs + `
    jit: true
    command: ["/bin/sh", "-c", "exec /bin/sh -ec \"$(cat)\" </dev/null 2>&1"]
    egress: ["rest.flock.test:443"]
    secrets: [rest]
  - id: 5
    command: ["` + claudeBin + `", "-p", "--allowedTools", "Bash"]
    limits: {memory: 1G, tasks: 400}
    jit: true
    models: {anthropic: {}}
    egress: ["git.flock.test:443", "gh.flock.test:443"]
    secrets: [github]
    env: {CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1", DISABLE_AUTOUPDATER: "1"}
`

// gitPush clones acme/repo, commits a file and pushes it, with git's
// credential helper answering the placeholder in $GH_TOKEN as the
// password, as gh auth git-credential would.
const gitPush = `cd "$HOME" && rm -rf repo
helper='!f() { echo username=x-access-token; echo "password=$GH_TOKEN"; }; f'
git -c credential.helper="$helper" clone -q https://git.flock.test/acme/repo.git repo
cd repo
echo "pushed by agent $AGENT_ID" > agent.txt
git add agent.txt
git -c user.name="agent $AGENT_ID" -c user.email=agent@flock.test commit -q -m "agent $AGENT_ID through flock-proxy"
git -c credential.helper="$helper" push -q origin HEAD:main
echo pushed`

// pythonGet and nodePost call the REST API with the placeholder as the
// bearer token, through HTTPS_PROXY, trusting the unit's bundle
// (REQUESTS_CA_BUNDLE, NODE_EXTRA_CA_CERTS); each prints the status and
// whether the token the API echoed is the placeholder it sent.
const (
	pythonGet = `/usr/bin/python3 - <<'EOF'
import os, requests
r = requests.get("https://rest.flock.test/v1/from-python", headers={"Authorization": "Bearer " + os.environ["REST_TOKEN"]}, timeout=10)
print(r.status_code, "echoed-placeholder" if r.json().get("token") == os.environ["REST_TOKEN"] else r.text)
EOF`
	nodePost = `NODE_NO_WARNINGS=1 /usr/bin/node - <<'EOF'
const { fetch, EnvHttpProxyAgent } = require("` + nodeClientDir + `/node_modules/undici");
fetch("https://rest.flock.test/v1/from-node", { method: "POST", body: "{}", headers: { authorization: "Bearer " + process.env.REST_TOKEN },
  dispatcher: new EnvHttpProxyAgent(), signal: AbortSignal.timeout(10000) })
  .then(async (r) => { const b = await r.json(); console.log(r.status, b.token === process.env.REST_TOKEN ? "echoed-placeholder" : JSON.stringify(b)); })
  .catch((e) => { console.log("fetch failed:", e.message, e.cause ? e.cause.message : ""); process.exit(1); });
EOF`
)

// curlAs is curl from an agent's script, printing the body, then the
// status and HTTP version on a line of their own. Debian's curl reads
// CURL_CA_BUNDLE, not SSL_CERT_FILE: flock sets both.
func curlAs(args string) string {
	return `curl -sS --max-time 10 -w '\n%{http_code} %{http_version}\n' ` + args + ` || true`
}

func TestSecrets(t *testing.T) {
	// Tier: root + nspawn, git, gh, curl, python3-requests, node and npm
	// (undici and Claude Code from the npm registry), podman and runsc.
	harness.SecretsTier.Require(t)
	requireRuntimes(t)
	node := npmStaged(t, "node-agent", []string{"examples", "node-agent"}, "--omit=dev")
	clients := stageModelClients(t)
	// The container levels' root file system: curl and node with undici
	// at the path the scripts name.
	rootfs := rootfsWith(t, "secrets-rootfs", []string{"/usr/bin/curl", "/usr/bin/node"}, map[string]string{node: nodeClientDir})
	m := harness.BootWith(t, harness.Options{NspawnArgs: []string{"--bind-ro=" + node + ":" + nodeClientDir,
		"--bind-ro=" + clients + ":" + modelsDir, "--bind=" + rootfs + ":" + secretsRootfs}})
	mustRun(t, m, "install", "-d", "-m", "0700", "/etc/flock/secrets", "/etc/flock/keys")
	for file, v := range map[string]string{githubSecretFile: secretValue, restSecretFile: restSecret,
		"/etc/flock/keys/anthropic": anthropicKey, "/etc/flock/keys/openai": openaiKey, "/etc/flock/keys/gemini": geminiKey} {
		if err := m.WriteFile(file, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	secretsUpstream(t, m)
	modelUpstream(t, m)
	provision(t, m, secretsSpec)
	waitActive(t, m, 1, 2, 3, 4, 5)
	waitBus(t, m, time.Time{}, 1, 2, 3, 4, 5)
	env1 := unitProp(t, m, 1, "Environment")
	ghP, restP := envValue(env1, "GH_TOKEN"), envValue(env1, "REST_TOKEN")
	if ghP == "" || ghP == secretValue || restP == "" || restP == restSecret {
		t.Fatalf("agent 1's placeholders: GH_TOKEN %q, REST_TOKEN %q:\n%s", ghP, restP, env1)
	}

	t.Run("git clones and pushes with the placeholder, the stand-in sees the token", func(t *testing.T) {
		if out := shTask(t, m, 1, gitPush); !strings.HasSuffix(strings.TrimSpace(out), "pushed") {
			t.Fatalf("git clone, commit, push from agent 1:\n%s", out)
		}
		wantPushed(t, m, 1, "agent.txt")
		wantSeen(t, m, standin.SeenRequest{Host: "git.flock.test", Method: "POST", Path: "/acme/repo.git/git-upload-pack", Credential: "Basic x-access-token:<secret github>", Status: 200})
	})

	t.Run("gh api reaches GitHub's API with the placeholder", func(t *testing.T) {
		if out := shTask(t, m, 1, "gh api user"); !strings.Contains(out, `"login":"flock-test-user"`) {
			t.Fatalf("gh api user from agent 1:\n%s", out)
		}
		wantSeen(t, m, standin.SeenRequest{Host: "gh.flock.test", Method: "GET", Path: "/api/v3/user", Credential: "token <secret github>", Status: 200})
	})

	t.Run("Python's requests and Node's fetch call the REST API, and the echoed secret comes back as the placeholder", func(t *testing.T) {
		for _, tc := range []struct{ name, script, path, method string }{
			{"python requests", pythonGet, "/v1/from-python", "GET"},
			{"node fetch", nodePost, "/v1/from-node", "POST"},
		} {
			if out := shTask(t, m, 1, tc.script); strings.TrimSpace(out) != "200 echoed-placeholder" {
				t.Errorf("%s from agent 1: %q, want 200 echoed-placeholder", tc.name, out)
			}
			wantSeen(t, m, standin.SeenRequest{Host: "rest.flock.test", Method: tc.method, Path: tc.path, Credential: "Bearer <secret rest>", Status: 200})
		}
	})

	t.Run("curl over HTTP/1.1 and HTTP/2, trusting the bundle", func(t *testing.T) {
		for _, version := range []string{"--http1.1", "--http2"} {
			out := shTask(t, m, 1, curlAs(``+version+` -H "Authorization: Bearer $REST_TOKEN" https://rest.flock.test/v1/from-curl`))
			want := `"token":"` + regexp.QuoteMeta(restP) + `".*\n200 ` + map[string]string{"--http1.1": `1\.1`, "--http2": `2`}[version] + `$`
			if !regexpMatch(want, strings.TrimSpace(out)) {
				t.Errorf("curl %s from agent 1:\n%s\nwant %s", version, out, want)
			}
		}
	})

	t.Run("at level podman and gvisor: curl and Node's fetch, and the rules", func(t *testing.T) {
		for _, a := range []struct {
			id    int
			level string
		}{{3, "podman"}, {4, "gvisor"}} {
			ph := envValue(unitProp(t, m, a.id, "Environment"), "REST_TOKEN")
			if ph == "" || ph == restSecret || ph == restP {
				t.Errorf("agent %d (%s): REST_TOKEN %q is not a placeholder of its own", a.id, a.level, ph)
				continue
			}
			for _, version := range []string{"--http1.1", "--http2"} {
				path := "/v1/from-" + a.level + "-curl" + strings.TrimPrefix(version, "--http")
				out := shTask(t, m, a.id, curlAs(version+` -H "Authorization: Bearer $REST_TOKEN" https://rest.flock.test`+path))
				if want := `"token":"` + regexp.QuoteMeta(ph) + `".*\n200 `; !regexpMatch(want, strings.TrimSpace(out)) {
					t.Errorf("curl %s from agent %d (%s):\n%s\nwant %s", version, a.id, a.level, out, want)
				}
				wantSeen(t, m, standin.SeenRequest{Host: "rest.flock.test", Method: "GET", Path: path, Credential: "Bearer <secret rest>", Status: 200})
			}
			node := strings.Replace(nodePost, "/v1/from-node", "/v1/from-"+a.level+"-node", 1)
			if out := shTask(t, m, a.id, node); strings.TrimSpace(out) != "200 echoed-placeholder" {
				t.Errorf("node fetch from agent %d (%s): %q, want 200 echoed-placeholder", a.id, a.level, out)
			}
			wantSeen(t, m, standin.SeenRequest{Host: "rest.flock.test", Method: "POST", Path: "/v1/from-" + a.level + "-node", Credential: "Bearer <secret rest>", Status: 200})
			out := shTask(t, m, a.id, curlAs(`-X DELETE -H "Authorization: Bearer $REST_TOKEN" https://rest.flock.test/v1/items/`+a.level))
			if want := `flock proxy: agent ` + strconv.Itoa(a.id) + `: refused: secret rest may not be sent in DELETE /v1/items/` + a.level + ` .*\n+403 `; !regexpMatch(want, out) {
				t.Errorf("a method outside the rules from agent %d (%s):\n%s\nwant %s", a.id, a.level, out, want)
			}
		}
	})

	t.Run("Claude Code's Bash commits and pushes with the placeholder", func(t *testing.T) {
		// A file of its own makes a commit of its own.
		script := strings.ReplaceAll(gitPush, "agent.txt", "claude.txt")
		out := shTask(t, m, 5, "run: <<CMD\n"+script+"\nCMD\n")
		if !strings.Contains(out, "Done. Bash said: pushed") {
			t.Fatalf("Claude Code (agent 5) running git push in its Bash tool:\n%s", out)
		}
		wantPushed(t, m, 5, "claude.txt")
	})

	t.Run("refused: the rules, an unbound host, an agent without the grant", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			agent  int
			script string
			want   string // a regexp of what the agent sees
		}{
			{"a method outside the rules", 1, curlAs(`-X DELETE -H "Authorization: Bearer $REST_TOKEN" https://rest.flock.test/v1/items/1`),
				`flock proxy: agent 1: refused: secret rest may not be sent in DELETE /v1/items/1 to rest.flock.test:443: no allow rule matches \(secrets\[name=rest\]\.rules\)\n+403 `},
			{"a path a deny rule names", 1, curlAs(`-H "Authorization: Bearer $REST_TOKEN" https://rest.flock.test/v1/admin/keys`),
				`refused: secret rest may not be sent in GET /v1/admin/keys to rest.flock.test:443: deny\[0\] any method /v1/admin \(secrets\[name=rest\]\.rules\)\n+403 `},
			{"a placeholder toward an intercepted host its secret is not bound to", 1, curlAs(`-H "Authorization: Bearer $GH_TOKEN" https://rest.flock.test/v1/unbound`),
				`refused: secret github is not bound to rest.flock.test:443: its placeholder is not sent there \(secrets\[name=github\]\.hosts\)\n+403 `},
			// A host no secret of the agent's is bound to is a plain
			// tunnel: the placeholder goes as it is, and is worth nothing.
			{"a placeholder toward a host bound to no secret", 1, curlAs(`-H "Authorization: Bearer $REST_TOKEN" https://elsewhere.flock.test/v1/elsewhere`),
				`"invalid token".*\n401 `},
			{"that host is not intercepted: its certificate is not the flock's", 1, curlAs(`--cacert /etc/flock/ca.crt https://elsewhere.flock.test/v1/elsewhere`),
				`SSL certificate problem`},
			{"another agent with a placeholder it read", 2, curlAs(`-H "Authorization: Bearer ` + restP + `" https://rest.flock.test/v1/stolen`),
				`"invalid token".*\n401 `},
			{"another agent's host is not intercepted", 2, curlAs(`--cacert /etc/flock/ca.crt https://rest.flock.test/v1/stolen`),
				`SSL certificate problem`},
			{"another agent's git with a placeholder it read", 2, `git clone -q https://x-access-token:` + ghP + `@git.flock.test/acme/repo.git "$HOME/stolen" || true`,
				`Authentication failed for 'https://git.flock.test/acme/repo.git/'`},
		} {
			if out := shTask(t, m, tc.agent, tc.script); !regexpMatch(tc.want, out) {
				t.Errorf("%s (agent %d):\n%s\nwant %s", tc.name, tc.agent, out, tc.want)
			} else {
				t.Logf("%-70s %s", tc.name, strings.ReplaceAll(strings.TrimSpace(out), "\n", " | "))
			}
		}
		seen := secretsSeen(t, m)
		for _, r := range seen {
			switch {
			case strings.HasPrefix(r.Path, "/v1/items/") || r.Path == "/v1/admin/keys" || r.Path == "/v1/unbound":
				t.Errorf("a refused request reached the stand-in: %+v", r)
			case strings.Contains(r.Credential, "<secret github>") && r.Host != "git.flock.test" && r.Host != "gh.flock.test",
				strings.Contains(r.Credential, "<secret rest>") && r.Host != "rest.flock.test":
				t.Errorf("a secret went to a host it is not bound to: %+v", r)
			case (r.Path == "/v1/stolen" || r.Path == "/v1/elsewhere" || strings.HasPrefix(r.Path, "/acme") && r.Status == 401) && strings.Contains(r.Credential, "<secret"):
				t.Errorf("a request not to be swapped carried the secret: %+v", r)
			}
		}
		wantSeen(t, m, standin.SeenRequest{Host: "elsewhere.flock.test", Method: "GET", Path: "/v1/elsewhere", Credential: "Bearer " + restP, Status: 401})
		wantSeen(t, m, standin.SeenRequest{Host: "rest.flock.test", Method: "GET", Path: "/v1/stolen", Credential: "Bearer " + restP, Status: 401})
		wantSeen(t, m, standin.SeenRequest{Host: "git.flock.test", Method: "GET", Path: "/acme/repo.git/info/refs", Credential: "Basic x-access-token:" + ghP + " ?service=git-upload-pack", Status: 401})
	})

	t.Run("the refusals are recorded: the journal and flockctl events", func(t *testing.T) {
		m.Eventually(t, 20*time.Second, func() error {
			out, _, err := run(t, m, "flockctl", "events", "--agent", "1", "--since", "10m")
			if err != nil {
				return err
			}
			for _, want := range []string{"CONNECT rest.flock.test:443 refused: secret-rule: secret rest may not be sent in DELETE /v1/items/1",
				"CONNECT rest.flock.test:443 refused: secret-unbound-host: secret github is not bound to rest.flock.test:443"} {
				if !strings.Contains(out, want) {
					return fmt.Errorf("flockctl events --agent 1 lacks %q:\n%s", want, out)
				}
			}
			return nil
		})
		// Each intercepted connection's record says what it carried.
		m.Eventually(t, 10*time.Second, func() error {
			journal := mustRun(t, m, "journalctl", "-u", "flock-proxy.service", "--no-pager", "-o", "export")
			if !regexpMatch(`\nDETAIL=intercepted for secrets github, rest: \d+ requests, [1-9]\d* carrying a secret`, journal) {
				return fmt.Errorf("flock-proxy's journal has no intercepted connection's record:\n%s", harness.TailLines(journal, 40))
			}
			return nil
		})
	})

	t.Run("counted per agent and secret: status and /metrics", func(t *testing.T) {
		m.Eventually(t, 20*time.Second, func() error {
			st := statusOut(t, m)
			if want := `secrets: agent 1: github [1-9]\d* sent, 1 refused \(secret-unbound-host\); rest [1-9]\d* sent, 2 refused \(secret-rule\) \(since flock-proxy started\)`; !regexpMatch(want, st) {
				return fmt.Errorf("flockctl status lacks %s:\n%s", want, st)
			}
			metrics := mustRun(t, m, "curl", "-sS", "http://127.0.0.1:8223/metrics")
			for _, want := range []string{`flock_agent_secret_refused_total{agent="1",reason="secret-rule",secret="rest"} 2`,
				`flock_agent_secret_refused_total{agent="1",reason="secret-unbound-host",secret="github"} 1`,
				`flock_agent_secret_refused_total{agent="3",reason="secret-rule",secret="rest"} 1`,
				`flock_agent_secret_requests_total{agent="3",secret="rest"} 3`,
				`flock_agent_secret_requests_total{agent="5",secret="github"} `} {
				if !strings.Contains(metrics, want) {
					return fmt.Errorf("/metrics lacks %s:\n%s", want, harness.TailLines(metrics, 30))
				}
			}
			return nil
		})
	})

	t.Run("audit: each agent's placeholders sent elsewhere are refused, and their controls carried", func(t *testing.T) {
		before := len(secretsSeen(t, m))
		want := map[int][]string{ // the secrets probes that must be blocked, by agent
			1: {"send secret github's placeholder to another name on git.flock.test:443's connection", "send secret github's placeholder to rest.flock.test:443",
				"send secret rest's placeholder to another name on rest.flock.test:443's connection", "send secret rest's placeholder to git.flock.test:443"},
			3: {"send secret rest's placeholder to another name on rest.flock.test:443's connection"},
			4: {"send secret rest's placeholder to another name on rest.flock.test:443's connection"},
		}
		for id, names := range want {
			r := runAudit(t, m, true, strconv.Itoa(id))
			got := map[string]audit.Outcome{}
			for _, a := range r.Agents {
				for _, o := range a.Probes {
					got[o.Probe] = o
				}
			}
			for _, name := range names {
				o, ok := got[name]
				switch {
				case !ok:
					t.Errorf("agent %d's audit has no probe %q", id, name)
				case o.Result != audit.Blocked || !strings.HasPrefix(o.Control, "carried upstream"):
					t.Errorf("agent %d: %s: %s (%s; control %s)", id, name, o.Result, o.Detail, o.Control)
				default:
					t.Logf("agent %d: %s: %s (%s; control %s)", id, name, o.Result, o.Detail, o.Control)
				}
			}
		}
		// The controls reached the stand-ins with the secret where it is
		// bound; no probe's request did.
		for _, r := range secretsSeen(t, m)[before:] {
			bound := map[string]string{"git.flock.test": "<secret github>", "gh.flock.test": "<secret github>", "rest.flock.test": "<secret rest>"}[r.Host]
			if !strings.HasSuffix(r.Path, "/flock-audit") || !strings.Contains(r.Credential, bound) || bound == "" {
				t.Errorf("the audit sent the stand-ins %+v", r)
			}
		}
	})

	t.Run("a rotated secret is sent from the next request on, over a tunnel opened before, flock-proxy not restarted", func(t *testing.T) {
		proxyBefore := proxyRun(t, m)
		// A tunnel of agent 1's held open across the rotation, as a long
		// download's would be: its unit ends if flock-proxy closes it.
		mustRun(t, m, "systemd-run", "--unit=flock-test-held", "--collect", "--uid=flock-1", "/usr/bin/python3", "-c", `
import socket, time
s = socket.create_connection(("127.0.0.1", 4230))
s.sendall(b"CONNECT elsewhere.flock.test:443 HTTP/1.1\r\nHost: elsewhere.flock.test:443\r\n\r\n")
print(s.recv(100).decode().splitlines()[0], flush=True)
s.setblocking(False)
while True:
    time.sleep(0.2)
    try:
        if s.recv(1, socket.MSG_PEEK) == b"":
            raise SystemExit("closed")
    except BlockingIOError:
        pass`)
		t.Cleanup(func() { run(t, m, "systemctl", "stop", "flock-test-held.service") })
		m.Eventually(t, 10*time.Second, func() error {
			if out, _, _ := run(t, m, "journalctl", "-u", "flock-test-held.service", "-o", "cat", "--no-pager"); !strings.Contains(out, "200") {
				return fmt.Errorf("the held tunnel is not open: %q", out)
			}
			return nil
		})
		if err := m.WriteFile(restSecretFile, []byte(restRotated+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		run(t, m, "systemctl", "stop", "flock-test-secrets.service")
		startSecretsStandin(t, m) // it wants the new secret now
		writeSpec(t, m, secretsSpec)
		if out := mustRun(t, m, "flockctl", "provision", "-f", specPath); !strings.Contains(out, "hand over ") || strings.Contains(out, "restarting it instead") {
			t.Errorf("provision did not hand the rotated secret over:\n%s", out)
		}
		if now := proxyRun(t, m); now != proxyBefore {
			t.Errorf("flock-proxy restarted (%q, was %q)", now, proxyBefore)
		}
		if got := strings.TrimSpace(mustRun(t, m, "systemctl", "show", "-p", "ActiveState", "--value", "flock-test-held.service")); got != "active" {
			t.Errorf("the tunnel held across the rotation: its unit is %s", got)
		}
		if ph := envValue(unitProp(t, m, 1, "Environment"), "REST_TOKEN"); ph != restP {
			t.Errorf("agent 1's placeholder moved from %q to %q for a secret of the same shape", restP, ph)
		}
		out := shTask(t, m, 1, strings.Replace(pythonGet, "/v1/from-python", "/v1/after-rotation", 1))
		if strings.TrimSpace(out) != "200 echoed-placeholder" {
			t.Errorf("Python's requests after the rotation: %q, want 200 echoed-placeholder", out)
		}
		wantSeen(t, m, standin.SeenRequest{Host: "rest.flock.test", Method: "GET", Path: "/v1/after-rotation", Credential: "Bearer <secret rest>", Status: 200})
	})

	t.Run("the secrets are in no unit, environment, file or journal an agent can read", func(t *testing.T) {
		assertSecretNowhere(t, m, secretValue)
		assertSecretNowhere(t, m, restSecret)
		assertSecretNowhere(t, m, restRotated)
	})
}

// secretsUpstream starts the stand-ins (probe secrets-serve) at
// secretsUpAddr:443 in tlsUpstream's namespace, outside the machine as an
// API is, for git., gh., rest. and elsewhere.flock.test, with a bare
// repository acme/repo of one commit; and puts their test CA among the
// machine's system roots, where flock-proxy verifies the upstreams and
// whence provision's bundle is made (so before provision).
func secretsUpstream(t *testing.T, m *harness.Machine) {
	t.Helper()
	tlsUpstream(t, m) // the namespace, the hosts file put back at the end
	mustRun(t, m, "ip", "-n", "flock-up", "addr", "add", secretsUpAddr+"/24", "dev", "flock-up1")
	mustRun(t, m, "sh", "-c", "printf '"+secretsUpAddr+" git.flock.test gh.flock.test rest.flock.test elsewhere.flock.test\\n' >> /etc/hosts")
	mustRun(t, m, "sh", "-ec", `git init -q --bare -b main `+secretsRepo+`
git -C `+secretsRepo+` config http.receivepack true
seed=$(mktemp -d)
git -C "$seed" init -q -b main
git -C "$seed" -c user.name=operator -c user.email=operator@flock.test commit -q --allow-empty -m seed
git -C "$seed" push -q `+secretsRepo+` main
rm -rf "$seed"`)
	startSecretsStandin(t, m)
	t.Cleanup(func() { run(t, m, "systemctl", "stop", "flock-test-secrets.service") })
	mustRun(t, m, "sh", "-c", "cat "+secretsCADir+"/ca.pem >> /etc/ssl/certs/ca-certificates.crt")
}

// wantPushed fails t unless the bare repository's main is agent id's
// commit of file (gitPush's), pushed with the real token.
func wantPushed(t *testing.T, m *harness.Machine, id int, file string) {
	t.Helper()
	if got := mustRun(t, m, "git", "-C", secretsRepo, "log", "-1", "--format=%s", "main"); strings.TrimSpace(got) != fmt.Sprintf("agent %d through flock-proxy", id) {
		t.Errorf("the bare repository's main is at %q, not agent %d's commit", got, id)
	}
	if got := mustRun(t, m, "git", "-C", secretsRepo, "show", "main:"+file); strings.TrimSpace(got) != fmt.Sprintf("pushed by agent %d", id) {
		t.Errorf("%s in the pushed commit: %q", file, got)
	}
	wantSeen(t, m, standin.SeenRequest{Host: "git.flock.test", Method: "POST", Path: "/acme/repo.git/git-receive-pack", Credential: "Basic x-access-token:<secret github>", Status: 200})
}

// startSecretsStandin starts the stand-ins, which read the secrets' files
// at their start (again, after a rotation).
func startSecretsStandin(t *testing.T, m *harness.Machine) {
	t.Helper()
	mustRun(t, m, "systemd-run", "--unit=flock-test-secrets", "--collect", "-p", "NetworkNamespacePath=/run/netns/flock-up",
		probeBin, "secrets-serve", secretsUpAddr+":443", secretsCADir, secretsGitRoot, githubSecretFile, restSecretFile)
	m.Eventually(t, 10*time.Second, func() error {
		_, err := seenAt(t, m)
		return err
	})
}

// seenAt is every request the stand-ins had, asked by root directly.
func seenAt(t *testing.T, m *harness.Machine) ([]standin.SeenRequest, error) {
	t.Helper()
	out, _, err := run(t, m, "curl", "-sS", "--max-time", "5", "--cacert", secretsCADir+"/ca.pem", "--resolve", "rest.flock.test:443:"+secretsUpAddr,
		"https://rest.flock.test/standin/seen")
	if err != nil {
		return nil, fmt.Errorf("the stand-ins' record: %v", err)
	}
	var seen []standin.SeenRequest
	return seen, json.Unmarshal([]byte(out), &seen)
}

func secretsSeen(t *testing.T, m *harness.Machine) []standin.SeenRequest {
	t.Helper()
	seen, err := seenAt(t, m)
	if err != nil {
		t.Fatal(err)
	}
	return seen
}

// wantSeen fails t unless the stand-ins had w (its protocol aside).
func wantSeen(t *testing.T, m *harness.Machine, w standin.SeenRequest) {
	t.Helper()
	seen := secretsSeen(t, m)
	var same []string
	for _, r := range seen {
		if r.Host == w.Host && r.Method == w.Method && r.Path == w.Path {
			if r.Credential == w.Credential && r.Status == w.Status {
				return
			}
			same = append(same, fmt.Sprintf("%+v", r))
		}
	}
	t.Errorf("the stand-in had no %s %s %s with %q answered %d; of that request it had:\n%s", w.Method, w.Host, w.Path, w.Credential, w.Status, strings.Join(same, "\n"))
}

// shTask runs script as agent id's task: a shell worker's, in its unit
// with its environment. It returns what the script printed (stdout and
// stderr), failing t if the task did not run at all.
func shTask(t *testing.T, m *harness.Machine, id int, script string) string {
	t.Helper()
	res, stderr, err := sendJSON(t, m, "--to", strconv.Itoa(id), script)
	if err != nil && res.TaskID == "" {
		t.Fatalf("flockctl send --to %d: %v\n%s", id, err, stderr)
	}
	if !res.OK {
		t.Logf("agent %d's task failed (%s, exit %d)", id, res.Error, res.ExitStatus)
	}
	return res.Output
}
