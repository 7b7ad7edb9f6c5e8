package test

// The model gateway, for real: a booted systemd, the real flock-proxy,
// the stand-in upstream outside the machine (TLS with a CA of its own,
// checking the key the proxy injects), and real clients at every level:
// Claude Code as a command: worker writing a file and running it back
// with its Write and Bash tools, and the official Anthropic, OpenAI and
// Google Gen AI SDKs, whole and streamed. No agent holds a key.

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/events"
	statusview "github.com/flockrun/flock/status"
	"github.com/flockrun/flock/test/harness"
	"github.com/flockrun/flock/test/standin"
	"github.com/flockrun/flock/test/transcript"
	"github.com/flockrun/flock/wire"
)

// gatewaySpec: agents 1-3 are Claude Code at each level, 4-6 the SDK
// client at each level, 7 a probe granted openai alone (the hostile
// one), 8 the SDK client under a small tokens_per_day.
func gatewaySpec(tokensPerDay int) string { return gatewaySpecWith(tokensPerDay, "") }

// sdkBudget is a budget of the SDK agents (4, 5 and 6: every level) in
// dollars, with the stand-in's Claude priced by the spec's own prices, as
// gatewaySpecWith adds it.
func sdkBudget(usdPerDay string) string {
	return "budgets:\n  - {name: sdk, agents: [4, 5, 6], usd_per_day: " + usdPerDay + "}\n"
}

// standinPrice is the spec's price of the stand-in's Claude, per million
// tokens: $3 in, $15 out, cache reads $0.30 and writes $3.75.
const standinPrice = `, prices: {claude-standin: {input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}}`

// gatewaySpecWith is gatewaySpec with budgets (a budgets: section; ""
// none), the stand-in's Claude priced when there are.
func gatewaySpecWith(tokensPerDay int, budgets string) string {
	price := ""
	if budgets != "" {
		price = standinPrice
	}
	var b strings.Builder
	fmt.Fprintf(&b, `defaults:
  heartbeat: 2s
  limits: {memory: 1G, tasks: 400}
  jit: true
  env: {CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1", DISABLE_AUTOUPDATER: "1"}
providers:
  - {name: anthropic, kind: anthropic, url: "https://%[1]s", key_file: /etc/flock/keys/anthropic, ca_file: %[2]s/ca.pem%[4]s}
  - {name: openai, kind: openai, url: "https://%[1]s/v1", key_file: /etc/flock/keys/openai, ca_file: %[2]s/ca.pem}
  - {name: local, kind: openai, url: "http://%[3]s/v1"}
  - {name: gemini, kind: gemini, url: "https://%[1]s", key_file: /etc/flock/keys/gemini, ca_file: %[2]s/ca.pem}
agents:
`, modelUpName, modelCADir, localModelAddr, price)
	for i, level := range []string{"process", "podman", "gvisor"} {
		root := ""
		if level != "process" {
			root = fmt.Sprintf("    level: %s\n    rootfs: %s\n", level, modelRootfs)
		}
		fmt.Fprintf(&b, "  - id: %d\n%s    command: [%q, \"-p\", \"--allowedTools\", \"Write,Bash\"]\n    models: {anthropic: {}}\n", 1+i, root, claudeBin)
		fmt.Fprintf(&b, "  - id: %d\n%s    command: [\"/usr/bin/node\", \"%s/client.js\"]\n    models: {anthropic: {requests_per_minute: 600}, openai: {concurrent: 8}, local: {}, gemini: {concurrent: 8}}\n", 4+i, root, modelsDir)
	}
	fmt.Fprintf(&b, `  - id: 7
    role: monitor
    exec: ["/usr/local/bin/probe", "serve"]
    models: {openai: {}}
  - id: 8
    command: ["/usr/bin/node", "%s/client.js"]
    models: {anthropic: {tokens_per_day: %d}}
`, modelsDir, tokensPerDay)
	b.WriteString(budgets)
	return b.String()
}

// A prompt of twenty words: with the stand-in's cache tokens and its five
// words of answer, 32 tokens a request.
const twentyWords = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty"

// TestModelGateway is the gateway end to end.
//
// Tier: root + nspawn, podman and runsc (the container levels), node and
// npm (the SDKs and Claude Code from the npm registry), curl.
func TestModelGateway(t *testing.T) {
	harness.RuntimesTier.Require(t)
	requireRuntimes(t)
	harness.BusTier.Require(t) // curl
	clients := stageModelClients(t)
	rootfs := modelRootfsFrom(t, clients)
	example := stageClaudeFlock(t)
	m := harness.BootWith(t, harness.Options{
		NspawnArgs: []string{"--bind-ro=" + clients + ":" + modelsDir, "--bind=" + rootfs + ":" + modelRootfs,
			"--bind-ro=" + example + ":" + claudeFlockDir},
	})
	mustRun(t, m, "mkdir", "-p", "-m", "0700", "/etc/flock/keys")
	for name, key := range map[string]string{"anthropic": anthropicKey, "openai": openaiKey, "gemini": geminiKey} {
		if err := m.WriteFile("/etc/flock/keys/"+name, []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	modelUpstream(t, m) // the stand-in expects the keys of those files

	t.Run("a key file others may read is refused, and nothing changes", func(t *testing.T) {
		mustRun(t, m, "chmod", "0644", "/etc/flock/keys/openai")
		writeSpec(t, m, gatewaySpec(400))
		_, stderr, err := run(t, m, "flockctl", "provision", "-f", specPath)
		want := specPath + ": providers[1].key_file: /etc/flock/keys/openai is readable or writable by others (mode 0644), and any user of this host could copy the key; chmod 600 /etc/flock/keys/openai"
		if err == nil || !strings.Contains(stderr, want) {
			t.Errorf("provision with a readable key: %v\n%s\nwant %q", err, stderr, want)
		}
		if out, _, _ := run(t, m, "sh", "-c", "ls /etc/flock/proxy.json /etc/systemd/system/flock.service 2>&1; systemctl list-units --no-legend 'flock*'"); !strings.Contains(out, "No such file") || strings.Contains(out, "flock-agent@") {
			t.Errorf("a refused provision changed the host:\n%s", out)
		}
		mustRun(t, m, "chmod", "0600", "/etc/flock/keys/openai")
	})

	provision(t, m, gatewaySpec(400))
	all := []int{1, 2, 3, 4, 5, 6, 7, 8}
	waitActive(t, m, all...)
	waitBus(t, m, time.Time{}, 1, 2, 3, 4, 5, 6, 8) // 7, the probe, speaks no NATS

	t.Run("Claude Code writes a file and runs it back through flockctl send, at every level", func(t *testing.T) {
		for _, id := range []int{1, 2, 3} {
			start := time.Now()
			out, stderr, err := run(t, m, "flockctl", "send", "--to", strconv.Itoa(id), fmt.Sprintf("write hello-%d.txt: hello from agent %d", id, id))
			want := fmt.Sprintf("Done. Bash said: hello from agent %d flock-bash-ok", id)
			if err != nil || !strings.Contains(out, want) {
				t.Errorf("agent %d (Claude Code, %s): %v\nstdout %q\nstderr %s", id, describeModel(id), err, out, harness.TailLines(stderr, 20))
				continue
			}
			file := fmt.Sprintf("%s/%d/hello-%d.txt", agentsDir, id, id)
			if b, err := m.ReadFile(file); err != nil || strings.TrimSpace(string(b)) != fmt.Sprintf("hello from agent %d", id) {
				t.Errorf("agent %d's file %s: %q, %v", id, file, b, err)
			}
			t.Logf("FIGURE Claude Code task (Write, Bash, answer; three model requests) at %s: %v", describeModel(id), time.Since(start).Round(time.Millisecond))
		}
	})

	t.Run("the official SDKs, whole and streamed, at every level", func(t *testing.T) {
		for _, id := range []int{4, 5, 6} {
			for _, payload := range []string{"anthropic: " + twentyWords, "anthropic stream: " + twentyWords, "openai: " + twentyWords, "openai stream: " + twentyWords,
				"local: " + twentyWords, "local stream: " + twentyWords, "gemini: " + twentyWords, "gemini stream: " + twentyWords} {
				out, stderr, err := run(t, m, "flockctl", "send", "--to", strconv.Itoa(id), payload)
				if err != nil || !strings.Contains(out, `"text":"word0 word1 word2 word3 word4"`) || !strings.Contains(out, `"usage":{`) {
					t.Errorf("agent %d (%s) %q: %v\nstdout %q\nstderr %s", id, describeModel(id), payload, err, out, harness.TailLines(stderr, 10))
				}
			}
		}
	})

	t.Run("no agent can read the keys: not in a unit, an environment, the journal, or a file they reach", func(t *testing.T) {
		for _, id := range all {
			env := mustRun(t, m, "systemctl", "show", unitName(id), "-p", "Environment")
			if strings.Contains(env, anthropicKey) || strings.Contains(env, openaiKey) || strings.Contains(env, geminiKey) {
				t.Errorf("agent %d's unit holds a key: %s", id, env)
			}
			if id != 7 && !strings.Contains(env, "ANTHROPIC_BASE_URL=http://127.0.0.1:4230/anthropic ANTHROPIC_API_KEY=flock-placeholder-the-proxy-adds-the-key") {
				t.Errorf("agent %d's environment lacks the gateway's base URL and the placeholder: %s", id, env)
			}
		}
		// The patterns come from the key files: a key on grep's own
		// command line would be found there.
		for _, file := range []string{"/etc/flock/keys/anthropic", "/etc/flock/keys/openai", "/etc/flock/keys/gemini"} {
			if out, _, _ := run(t, m, "sh", "-c", "grep -lsFf "+file+" /proc/[0-9]*/environ /proc/[0-9]*/cmdline; journalctl -o export --no-pager | grep -cFf "+file); strings.TrimSpace(out) != "0" {
				t.Errorf("the key of %s is in a process's environment or command line, or in the journal:\n%s", file, out)
			}
		}
		unit := mustRun(t, m, "systemctl", "cat", "flock-proxy.service")
		for _, want := range []string{"LoadCredential=model-key-anthropic:/etc/flock/keys/anthropic", "LoadCredential=model-key-openai:/etc/flock/keys/openai",
			"LoadCredential=model-key-gemini:/etc/flock/keys/gemini", "StateDirectory=flock-proxy"} {
			if !strings.Contains(unit, want) {
				t.Errorf("flock-proxy.service lacks %s:\n%s", want, unit)
			}
		}
		p := startedProbe(t, m, 7)
		if r := p.do(t, map[string]any{"op": "read-secret", "path": "/etc/flock/keys/anthropic"}); r.OK {
			t.Errorf("ESCAPE: agent 7 read the key file: %s", r)
		}
		// flockctl audit proves the same from inside every agent (their
		// model probes: each key's file, each key in the environment,
		// another agent's grant), with root's controls.
		rep := runAudit(t, m, true)
		n := 0
		for _, a := range rep.Agents {
			for _, o := range a.Probes {
				if o.Category != "models" {
					continue
				}
				n++
				if string(o.Result) != "blocked" {
					t.Errorf("audit, agent %d: %s: %s (%s; control %s)", a.Agent, o.Probe, o.Result, o.Detail, o.Control)
				}
			}
		}
		if n < 2*2*len(all) {
			t.Errorf("audit ran %d model probes, want at least %d", n, 4*len(all))
		}
	})

	t.Run("refusals are fast, in the provider's format, and name the fix", func(t *testing.T) {
		// curl as agent 7's uid: the gateway knows a client by nothing
		// else (the audit above tried the same from inside its unit).
		asAgent7 := "setpriv --reuid=2000000007 --regid=2000000007 --clear-groups "
		curl := func(args string) (string, time.Duration) {
			start := time.Now()
			out, errOut, _ := run(t, m, "sh", "-c", args+" -sS --max-time 20 -w '\n%{http_code}'")
			return errOut + out, time.Since(start)
		}
		for _, tc := range []struct{ name, cmd, want string }{
			{"another agent's grant", asAgent7 + "curl -d {} http://127.0.0.1:4230/anthropic/v1/messages",
				`agent 7 is not granted provider anthropic; add anthropic to agents\[id=7\].models in the spec.*"type":"permission_error".*\n403$`},
			{"a provider not in the spec", asAgent7 + "curl http://127.0.0.1:4230/mistral/v1/models", `no provider \\"mistral\\" here; it is granted openai.*\n404$`},
			{"an endpoint that is not metered", asAgent7 + "curl -d {} http://127.0.0.1:4230/openai/batches", `POST \\"/batches\\" is not an endpoint the model gateway carries.*\n404$`},
			// The local server itself is out of the agent's reach: the
			// firewall refuses this host's loopback but for the bus and
			// the proxy.
			{"the local model server, directly", asAgent7 + "curl http://" + localModelAddr + "/v1/models", `Failed to connect.*\n000$`},
			{"a body over the bound", fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a | %s curl --data-binary @- http://127.0.0.1:4230/openai/chat/completions", 32<<20+1, asAgent7),
				`"code":"request_too_large".*\n413$`},
		} {
			out, took := curl(tc.cmd)
			if !regexpMatch(tc.want, strings.TrimSpace(out)) {
				t.Errorf("%s: %s\nwant %s", tc.name, out, tc.want)
			}
			t.Logf("FIGURE refusal: %-32s in %v (the shell and curl included)", tc.name, took.Round(time.Millisecond))
		}
	})

	var estimated standin.Usage // what flock estimated of a stream cut before its usage
	t.Run("the gateway holds against its agent: a stream cut before its usage, a dot path, a burst of the largest bodies", func(t *testing.T) {
		p := startedProbe(t, m, 7)
		base := "http://127.0.0.1:4230/openai"
		proxyPID := mustRun(t, m, "systemctl", "show", "-p", "MainPID", "--value", "flock-proxy.service")
		before := map[string]uint64{}
		for _, r := range usageOf(t, m, "7") {
			if r.Provider == "openai" {
				before["in"], before["out"], before["est"], before["cut"] = r.InputTokens, r.OutputTokens, r.Estimated, r.Errors["cut"]
			}
		}
		// The client reads twenty text events of a stream of 400 words and
		// closes it, before the usage in its last chunk.
		r := p.do(t, map[string]any{"op": "model-cut", "addr": base, "path": "/chat/completions", "count": 20,
			"data": `{"model":"gpt-x","stream":true,"messages":[{"role":"user","content":"write"}]}`,
			"env":  []string{"X-Standin-Words=400", "X-Standin-Delay=5ms"}})
		if !r.OK {
			t.Fatalf("agent 7's cut stream: %s", r)
		}
		m.Eventually(t, 20*time.Second, func() error {
			for _, u := range usageOf(t, m, "7") {
				if u.Provider == "openai" && u.OutputTokens >= before["out"]+20 && u.Estimated == before["est"]+1 && u.Errors["cut"] == before["cut"]+1 {
					t.Logf("FIGURE a stream closed after 20 text events of 400: %d output tokens counted, estimated", u.OutputTokens-before["out"])
					// The stand-in stopped when the gateway left, and
					// reported nothing: flock's estimate is its own.
					estimated = standin.Usage{Input: u.InputTokens - before["in"], Output: u.OutputTokens - before["out"]}
					return nil
				}
			}
			return fmt.Errorf("agent 7 closed a stream after 20 words; flockctl usage 7: %+v (before: %v)", usageOf(t, m, "7"), before)
		})
		for _, tc := range []struct {
			name string
			req  map[string]any
			want string
		}{
			{"a path with a dot segment", map[string]any{"op": "model-request", "addr": base, "path": "/x/../models"}, `HTTP 400 Bad Request: flock proxy: agent 7: the path "/x/../models" has a ".." segment`},
			{"a body with a key twice", map[string]any{"op": "model-request", "addr": base, "path": "/chat/completions", "data": `{"model":"gpt-x","stream":false,"stream":true}`}, `is in the request body twice`},
			{"three bodies of 32 MiB at once", map[string]any{"op": "model-burst", "addr": base, "path": "/chat/completions", "size": 32 << 20, "count": 3, "timeout_ms": 9000},
				`3 bodies of 33554432 bytes at once: 1 refused before their end, 2 held; the first refusal: 429 flock proxy: agent 7: the gateway holds 64 MiB of this agent's request bodies`},
		} {
			r := p.do(t, tc.req)
			if r.OK || !strings.Contains(r.Err, tc.want) {
				t.Errorf("agent 7: %s: %s\nwant refused: %s", tc.name, r, tc.want)
			}
		}
		if again := mustRun(t, m, "systemctl", "show", "-p", "MainPID", "--value", "flock-proxy.service"); again != proxyPID {
			t.Errorf("flock-proxy restarted (pid %s, was %s)", strings.TrimSpace(again), strings.TrimSpace(proxyPID))
		}
		if out, stderr, err := run(t, m, "flockctl", "send", "--to", "4", "openai: after the burst"); err != nil {
			t.Errorf("a bystander after the burst: %v %s %s", err, out, stderr)
		}
	})

	t.Run("over tokens_per_day: a 429 with the line, one event, a new limit without a restart", func(t *testing.T) {
		since := time.Now()
		var used uint64 // before: the audit's control spent a few
		for _, r := range usageOf(t, m, "8") {
			if r.Provider == "anthropic" {
				used = r.TodayTokens
			}
		}
		refused, through := 0, 0
		// What the operator sees of it (docs/troubleshooting.md): the last
		// send, refused, then usage and events.
		limit := transcript.New(t, "model-429")
		// Each request reserves its max_tokens (256) and its input's
		// estimate before it goes: the first whose reservation does not
		// fit beside what is used is refused, and what is used never
		// passes the limit.
		line := regexp.MustCompile(`flock proxy: agent 8: over its limit tokens_per_day=400 of provider anthropic: (\d+) tokens used today \(UTC\); this request may spend up to (\d+) \(256 of output at most, about \d+ of input\) and (\d+) are left: ask for less output \(max_tokens\), or retry when requests under way end; resets at `)
		for i := 0; i < 6; i++ {
			var stderr string
			var err error
			if i < 5 {
				_, stderr, err = run(t, m, "flockctl", "send", "--to", "8", "anthropic: "+twentyWords)
			} else {
				stderr, err = limit.Run(m, "flockctl send --to 8 'anthropic: "+twentyWords+"'")
			}
			if err == nil {
				if refused > 0 {
					t.Fatalf("request %d went through after a refusal", i)
				}
				through++
				used += 32
				continue
			}
			refused++
			mm := line.FindStringSubmatch(stderr)
			if !strings.Contains(stderr, "429") || mm == nil || mm[1] != strconv.FormatUint(used, 10) {
				t.Errorf("request %d (%d tokens used): %s", i, used, stderr)
				continue
			}
			if want, _ := strconv.ParseUint(mm[2], 10, 64); used+want <= 400 || used > 400 {
				t.Errorf("request %d refused with %d used and %d wanted of 400", i, used, want)
			}
		}
		if through == 0 || refused == 0 {
			t.Errorf("%d of 6 through, %d refused; want some of each", through, refused)
		}
		m.Eventually(t, 20*time.Second, func() error {
			evs := eventsOf(t, m, "--since", since.Add(-time.Second).Format(time.RFC3339), "--agent", "8")
			if n := count(evs, events.LimitReached, 8, "over its limit tokens_per_day=400 of provider anthropic"); n != 1 {
				return fmt.Errorf("%d limit-reached events of agent 8, want 1:\n%s", n, texts(evs))
			}
			return nil
		})
		m.Eventually(t, 10*time.Second, func() error {
			for _, r := range usageOf(t, m, "8") {
				if r.Provider == "anthropic" && r.Refused["tokens_per_day"] == uint64(refused) && r.TodayTokens == used {
					return nil
				}
			}
			return fmt.Errorf("flockctl usage 8: %+v", usageOf(t, m, "8"))
		})
		limit.Want(m, "flockctl usage 8", fmt.Sprintf("tokens_per_day: %d", refused))
		if out, _ := limit.Run(m, "flockctl events --agent 8 --since 10m | grep limit-reached"); strings.Count(out, "limit-reached") != 1 {
			t.Errorf("flockctl events --agent 8: want one limit-reached event:\n%s", out)
		}
		agentRun := mustRun(t, m, "systemctl", "show", "-p", "InvocationID", "--value", unitName(8))
		proxyPID := mustRun(t, m, "systemctl", "show", "-p", "MainPID", "--value", "flock-proxy.service")
		provision(t, m, gatewaySpec(100000))
		if again := mustRun(t, m, "systemctl", "show", "-p", "InvocationID", "--value", unitName(8)); again != agentRun {
			t.Errorf("a new limit restarted agent 8")
		}
		if again := mustRun(t, m, "systemctl", "show", "-p", "MainPID", "--value", "flock-proxy.service"); again != proxyPID {
			t.Errorf("a new limit restarted the proxy (pid %s, was %s), want a reload", strings.TrimSpace(again), strings.TrimSpace(proxyPID))
		}
		if out, stderr, err := run(t, m, "flockctl", "send", "--to", "8", "anthropic: "+twentyWords); err != nil {
			t.Errorf("under the new limit: %v %s %s", err, out, stderr)
		}
	})

	t.Run("over a budget in dollars shared by agents at every level: a 429 naming it, one event, the spend under it", func(t *testing.T) {
		since := time.Now()
		// Each request reserves its most ($0.0043: 256 tokens of output at
		// $15 per million, its input at the dearest input price) and
		// costs $0.000144 (the stand-in's 20 in, 5 out, 5 read from
		// the cache and 2 written, at the spec's prices): a budget of
		// half a cent lets a few through.
		provision(t, m, gatewaySpecWith(100000, sdkBudget("0.005")))
		spentRe := regexp.MustCompile(`over the limit usd_per_day=\$0\.005 of budget sdk: \$(0\.\d+) spent today \(UTC\) by its agents; this request may cost up to \$0\.00\d+ \(256 tokens of output at most\)`)
		through, refused := 0, 0
		for i := 0; i < 12 && refused == 0; i++ {
			id := 4 + i%3 // process, podman, gvisor in turn
			_, stderr, err := run(t, m, "flockctl", "send", "--to", strconv.Itoa(id), "anthropic: "+twentyWords)
			if err == nil {
				through++
				continue
			}
			refused++
			mm := spentRe.FindStringSubmatch(stderr)
			if !strings.Contains(stderr, "429") || mm == nil {
				t.Fatalf("agent %d: %s", id, stderr)
			}
			spent, _ := wire.ParseUSD(mm[1])
			if want := wire.PicoUSD(through) * 144 * wire.USD / 1e6; spent != want {
				t.Errorf("the budget says %s spent by %d requests, want %s (each $0.000144 at the spec's prices)", spent, through, want)
			}
		}
		if through == 0 || refused == 0 {
			t.Errorf("%d through, %d refused; want some of each", through, refused)
		}
		m.Eventually(t, 20*time.Second, func() error {
			evs := eventsOf(t, m, "--since", since.Add(-time.Second).Format(time.RFC3339))
			n := 0
			for _, id := range []int{4, 5, 6} {
				n += count(evs, events.LimitReached, id, "over the limit usd_per_day=$0.005 of budget sdk")
			}
			if n != 1 {
				return fmt.Errorf("%d limit-reached events of budget sdk, want 1:\n%s", n, texts(evs))
			}
			return nil
		})
		provision(t, m, gatewaySpec(100000))
		if _, stderr, err := run(t, m, "flockctl", "send", "--to", "5", "anthropic: "+twentyWords); err != nil {
			t.Errorf("with the budget gone: %v %s", err, stderr)
		}
	})

	// everyTokenCounted says whether flock's counts, as flockctl usage has
	// them, are every token the upstreams reported (and what flock
	// estimated of a stream cut before its usage): nothing under way or
	// not yet published.
	everyTokenCounted := func() error {
		want, err := standinLedger(t, m, "")
		if err != nil {
			return err
		}
		local, err := ledgerAt(t, m, "http://"+localModelAddr, "")
		if err != nil {
			return err
		}
		want = want.Plus(local).Plus(estimated)
		got := sumUsage(usageOf(t, m))
		if got.Input != want.Input || got.Output != want.Output || got.CacheRead != want.CacheRead || got.CacheWrite != want.CacheWrite || want.Output == 0 {
			return fmt.Errorf("flock counted %+v, the stand-in reported %+v", got, want)
		}
		return nil
	}

	t.Run("each task's cost: what its requests spent at every level, the sum its agent's, a task's budget a 429 naming it", func(t *testing.T) {
		// Priced (the budget is too large to matter): each task's spend
		// has dollars.
		provision(t, m, gatewaySpecWith(100000, sdkBudget("1000")))
		agents := []int{1, 4, 5, 6}
		// Read once every earlier request is counted and published.
		m.Eventually(t, 20*time.Second, everyTokenCounted)
		before := map[int]statusview.ModelUse{}
		for _, id := range agents {
			before[id] = totalUse(usageOf(t, m, strconv.Itoa(id)))
		}
		spent := map[int]wire.TaskSpend{}
		for _, id := range agents {
			// The models the spec prices (budget sdk limits dollars: an
			// unpriced one is refused).
			payloads := []string{"anthropic stream: " + twentyWords, "anthropic: " + twentyWords}
			if id == 1 {
				payloads = []string{"write cost-1.txt: what a task costs"}
			}
			for _, p := range payloads {
				res, stderr, err := sendJSON(t, m, "--to", strconv.Itoa(id), p)
				if err != nil || !res.OK || res.Spend == nil {
					t.Fatalf("agent %d (%s) %q: %v %+v\n%s", id, describeModel(id), p, err, res, harness.TailLines(stderr, 10))
				}
				s := res.Spend
				if s.Requests == 0 || s.Tokens.Total() == 0 || s.Cost == 0 || s.OutOfBudget {
					t.Errorf("agent %d's task %s: spend %+v, want its requests, tokens and cost", id, res.TaskID, *s)
				}
				t.Logf("FIGURE agent %d (%s) task %q: %s", id, describeModel(id), p, s.Line())
				sum := spent[id]
				sum.Requests, sum.Cost = sum.Requests+s.Requests, sum.Cost+s.Cost
				sum.Tokens.Add(s.Tokens)
				spent[id] = sum
			}
		}
		// Every request of these workers was made while they held a
		// task: the sum over their tasks is what their counts grew by,
		// exactly.
		m.Eventually(t, 20*time.Second, func() error {
			for _, id := range agents {
				after := totalUse(usageOf(t, m, strconv.Itoa(id)))
				grew := wire.TaskSpend{Requests: after.Requests - before[id].Requests, Cost: after.Cost - before[id].Cost,
					Tokens: wire.Tokens{InputTokens: after.InputTokens - before[id].InputTokens, OutputTokens: after.OutputTokens - before[id].OutputTokens,
						CacheReadTokens: after.CacheReadTokens - before[id].CacheReadTokens, CacheWriteTokens: after.CacheWriteTokens - before[id].CacheWriteTokens,
						CacheWriteLongTokens: after.CacheWriteLongTokens - before[id].CacheWriteLongTokens}}
				if s := spent[id]; grew.Requests != s.Requests || grew.Tokens != s.Tokens || grew.Cost != s.Cost {
					return fmt.Errorf("agent %d: its tasks spent %s, its counts grew by %s", id, s.Line(), grew.Line())
				}
			}
			return nil
		})
		t.Logf("FIGURE the sum over each agent's tasks equals what its counts grew by, exactly: %d tasks of agents %v", 3*2+1, agents)

		// A task's own budget: the SDK's first request would pass it, so
		// it is refused before it is sent; the SDK raises the 429 at once
		// and the result says the task ran out of budget.
		since := time.Now()
		for _, tc := range []struct {
			id      int
			flags   []string
			payload string
			limit   string
		}{
			{4, []string{"--budget-tokens", "100"}, "anthropic: " + twentyWords, "task_tokens=100"},
			{1, []string{"--budget-usd", "0.000001"}, "write over.txt: more than its budget", "task_usd=$0.000001"},
		} {
			start := time.Now()
			res, stderr, err := sendJSON(t, m, append(append([]string{"--to", strconv.Itoa(tc.id)}, tc.flags...), tc.payload)...)
			said := res.Output + res.Stderr + res.Error + stderr
			if err == nil || res.OK || res.Spend == nil || !res.Spend.OutOfBudget || res.Spend.Cost != 0 || res.Spend.Tokens.Total() != 0 {
				t.Errorf("agent %d (%s) over its task's budget: %v, %+v; want the task failed, out of its budget, nothing spent", tc.id, describeModel(tc.id), err, res)
			} else if want := "is out of its budget " + tc.limit; !strings.Contains(said, "task "+strconv.Quote(res.TaskID)) && !strings.Contains(said, `task \"`+res.TaskID+`\"`) ||
				!strings.Contains(said, want) || !strings.Contains(said, "429") {
				// The program prints the SDK's error, the message JSON-quoted.
				t.Errorf("agent %d's task says:\n%s\nwant the 429, the task's id and %q", tc.id, said, want)
			}
			t.Logf("FIGURE agent %d (%s) refused past its task's budget: the task failed in %v", tc.id, describeModel(tc.id), time.Since(start).Round(time.Millisecond))
			m.Eventually(t, 20*time.Second, func() error {
				evs := eventsOf(t, m, "--agent", strconv.Itoa(tc.id), "--since", since.Add(-time.Second).Format(time.RFC3339))
				if n := count(evs, events.LimitReached, tc.id, fmt.Sprintf("task %q is out of its budget %s", res.TaskID, tc.limit)); n != 1 {
					return fmt.Errorf("%d limit-reached events of task %s, want 1:\n%s", n, res.TaskID, texts(evs))
				}
				return nil
			})
		}
		provision(t, m, gatewaySpec(100000))
	})

	t.Run("every token the upstream reported is counted, and /metrics says so", func(t *testing.T) {
		m.Eventually(t, 20*time.Second, everyTokenCounted)
		rows := usageOf(t, m, "4")
		metrics := mustRun(t, m, "curl", "-sS", "http://127.0.0.1:8223/metrics")
		for _, r := range rows {
			line := fmt.Sprintf(`flock_agent_model_tokens_total{agent="4",kind="input",provider="%s"} %d`, r.Provider, r.InputTokens)
			if !strings.Contains(metrics, line+"\n") {
				t.Errorf("/metrics lacks %s", line)
			}
		}
		table := mustRun(t, m, "flockctl", "usage")
		t.Logf("flockctl usage:\n%s", table)
		if st := statusOut(t, m); !strings.Contains(st, "models: agent 8: anthropic ") {
			t.Errorf("flockctl status lacks agent 8's models line:\n%s", st)
		}
	})

	t.Run("the counts survive the proxy, a reboot and a spec change", func(t *testing.T) {
		before := usageOf(t, m)
		same := func(when string) {
			t.Helper()
			m.Eventually(t, 60*time.Second, func() error {
				now := usageOf(t, m)
				if len(now) != len(before) {
					return fmt.Errorf("%s: %d rows, were %d", when, len(now), len(before))
				}
				for i := range now {
					if now[i].Requests != before[i].Requests || tokensOf(now[i]) != tokensOf(before[i]) || !now[i].Reported {
						return fmt.Errorf("%s: agent %d %s: %+v, was %+v", when, now[i].Agent, now[i].Provider, now[i], before[i])
					}
				}
				return nil
			})
		}
		mustRun(t, m, "systemctl", "restart", "flock-proxy.service")
		same("after a restart of the proxy")
		// Killed while a stream of agent 7's is under way: the request
		// was spent, how much is not known, so it counts at what it
		// reserved (its input's estimate and the default maximum).
		p := startedProbe(t, m, 7)
		p.send(t, map[string]any{"op": "model-cut", "addr": "http://127.0.0.1:4230/openai", "path": "/chat/completions", "count": 1000, "background": true,
			"timeout_ms": 60000, "data": `{"model":"gpt-x","stream":true,"messages":[{"role":"user","content":"write"}]}`,
			"env": []string{"X-Standin-Words=1000", "X-Standin-Delay=20ms", "X-Standin-Tag=killed"}})
		m.Eventually(t, 20*time.Second, func() error {
			if u, err := standinLedger(t, m, "killed"); err != nil || u.Requests != 1 {
				return fmt.Errorf("the stream has not reached the stand-in: %+v %v", u, err)
			}
			return nil
		})
		mustRun(t, m, "systemctl", "kill", "-s", "KILL", "flock-proxy.service")
		for i, r := range before {
			if r.Agent == 7 && r.Provider == "openai" {
				before[i].Requests++
			}
		}
		m.Eventually(t, 60*time.Second, func() error {
			for _, now := range usageOf(t, m, "7") {
				for _, was := range before {
					if was.Agent == 7 && now.Provider == "openai" && was.Provider == "openai" &&
						now.Requests == was.Requests && now.Estimated == was.Estimated+1 && tokensOf(now) >= tokensOf(was)+32768 {
						t.Logf("FIGURE a stream under way when flock-proxy was killed: counted at its reservation, %d tokens", tokensOf(now)-tokensOf(was))
						before = usageOf(t, m)
						return nil
					}
				}
			}
			return fmt.Errorf("after the proxy was killed mid-stream: agent 7: %+v", usageOf(t, m, "7"))
		})
		same("after the proxy was killed")
		if err := m.Reboot(t.Context()); err != nil {
			t.Fatal(err)
		}
		waitActive(t, m, all...)
		same("after a reboot")
		modelUpstream(t, m) // its network namespace went with the reboot
		if out, stderr, err := run(t, m, "flockctl", "send", "--to", "4", "anthropic: after the reboot"); err != nil {
			t.Errorf("after the reboot: %v %s %s", err, out, stderr)
		}
		// Agent 8 loses its grant: its counts stay, as no longer granted.
		provision(t, m, strings.Replace(gatewaySpec(100000), "models: {anthropic: {tokens_per_day: 100000}}", "models: {}", 1))
		m.Eventually(t, 20*time.Second, func() error {
			for _, r := range usageOf(t, m, "8") {
				if r.Provider == "anthropic" && !r.Granted && r.Requests > 0 {
					return nil
				}
			}
			return fmt.Errorf("agent 8 after its grant went: %+v", usageOf(t, m, "8"))
		})
	})

	// Last: the stand-in's ledger starts again when it does.
	t.Run("the provider down: a fast 502 in its format, raised by the SDK", func(t *testing.T) {
		mustRun(t, m, "systemctl", "stop", "flock-test-standin.service")
		m.Eventually(t, 10*time.Second, func() error {
			if _, err := standinLedger(t, m, ""); err == nil {
				return fmt.Errorf("the stand-in still answers")
			}
			return nil
		})
		start := time.Now()
		out, stderr, err := run(t, m, "flockctl", "send", "--to", "4", "openai: hello")
		if err == nil || !strings.Contains(stderr, "502 flock proxy: agent 4: provider openai (https://"+modelUpName+"/v1) did not answer") {
			st, _, _ := run(t, m, "systemctl", "status", "--no-pager", "flock-test-standin.service", "flock-proxy.service")
			t.Errorf("the provider down: %v\nstdout %s\nstderr %s\n%s", err, out, stderr, st)
		}
		t.Logf("FIGURE provider down: the task failed in %v: %s", time.Since(start).Round(time.Millisecond), firstLine(stderr))
		startStandin(t, m)
	})

	// examples/claude-flock as an operator runs it (its README's steps),
	// against the stand-in: the orchestrator hands two jobs from
	// jobs.txt to the Claude Code workers and keeps their answers.
	t.Run("examples/claude-flock: an orchestrator and Claude Code workers", func(t *testing.T) {
		mustRun(t, m, "ln", "-sf", claudeBin, "/usr/local/bin/claude")
		b, err := os.ReadFile(harness.InRepo(t, "examples", "claude-flock", "flock.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		spec := strings.Replace(string(b), `url: "https://api.anthropic.com", key_file: /etc/flock/keys/anthropic}`,
			`url: "https://`+modelUpName+`", key_file: /etc/flock/keys/anthropic, ca_file: `+modelCADir+`/ca.pem}`, 1)
		if spec == string(b) {
			t.Fatal("the example's provider line moved; update this test")
		}
		provision(t, m, spec)
		waitActive(t, m, 1, 2, 3, 4)
		jobs := "write one.txt: the first job\nwrite two.txt: the second job\n"
		mustRun(t, m, "sh", "-c", "printf '"+jobs+"' > /srv/flock/common/jobs.txt")
		for n, want := range map[string]string{"1": "Done. Bash said: the first job flock-bash-ok", "2": "Done. Bash said: the second job flock-bash-ok"} {
			m.Eventually(t, 3*time.Minute, func() error {
				b, err := m.ReadFile("/srv/flock/common/results/" + n + ".md")
				if err != nil || !strings.Contains(string(b), want) || !strings.Contains(string(b), "done by agent") {
					return fmt.Errorf("results/%s.md: %q, %v", n, b, err)
				}
				return nil
			})
		}
		rows := usageOf(t, m)
		used := 0
		for _, r := range rows {
			if r.Agent >= 2 && r.Agent <= 4 && r.Granted && r.TodayRequests > 0 {
				used++
			}
		}
		if used == 0 {
			t.Errorf("no worker of the example counted a request today: %+v", rows)
		}
	})
}

func describeModel(id int) string {
	return map[int]string{1: "process", 2: "podman", 3: "gvisor", 4: "process", 5: "podman", 6: "gvisor", 8: "process"}[id]
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}
