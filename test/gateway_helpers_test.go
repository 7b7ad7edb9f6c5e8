package test

// The model gateway's system test's setting: the official SDKs and
// Claude Code from the npm registry, a root file system for them at the
// container levels, and the stand-in upstream outside the machine.

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	statusview "github.com/flockrun/flock/status"
	"github.com/flockrun/flock/test/harness"
	"github.com/flockrun/flock/test/standin"
	"github.com/flockrun/flock/wire"
)

const (
	modelsDir    = "/opt/flock-models" // the clients, in the machine and in the rootfs
	modelRootfs  = "/var/lib/flock-test/model-rootfs"
	modelCADir   = "/etc/flock-test-model-ca" // the stand-in's CA (ca.pem: the providers' ca_file)
	modelUpName  = "api.model.test"
	modelUpAddr  = "198.51.100.10"
	anthropicKey = "sk-ant-test-operator-key-0123456789"
	openaiKey    = "sk-test-operator-key-abcdefghij"
	geminiKey    = "AIza-test-operator-key-0123456789"
	claudeBin    = modelsDir + "/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
	// localModelAddr is a keyless model server on the machine's loopback,
	// as Ollama is: provider local's upstream, plain HTTP.
	localModelAddr = "127.0.0.1:11434"
	// claudeFlockDir is where examples/claude-flock's README installs it.
	claudeFlockDir = "/opt/flock-examples/claude-flock"
)

// stageModelClients is test/testdata/model-clients with its packages
// from the npm registry (--ignore-scripts: Claude Code's postinstall only
// copies the native binary its platform package already holds, which the
// spec runs directly).
func stageModelClients(t *testing.T) string {
	t.Helper()
	dir := npmStaged(t, "flock-models", []string{"test", "testdata", "model-clients"}, "--ignore-scripts")
	if _, err := os.Stat(filepath.Join(dir, strings.TrimPrefix(claudeBin, modelsDir))); err != nil {
		t.Fatalf("Claude Code's native binary: %v", err)
	}
	return dir
}

// stageClaudeFlock is examples/claude-flock as its README
// installs it: its orchestrator's nats client from the npm registry.
func stageClaudeFlock(t *testing.T) string {
	return npmStaged(t, "claude-flock", []string{"examples", "claude-flock"}, "--omit=dev")
}

// npmStaged is the repository's directory at elem, copied to a temp dir
// called name, with its packages from the npm registry (npm ci: the
// pinned lock file) and readable by the agents.
func npmStaged(t *testing.T, name string, elem []string, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dir, os.DirFS(harness.InRepo(t, elem...))); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, "node_modules")) // a developer's own
	cmd := exec.Command("npm", append(append([]string{"ci"}, args...), "--no-audit", "--no-fund")...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", filepath.Join(elem...), err, out)
	}
	openUp(t, dir)
	return dir
}

// openUp makes dir and everything under it readable (and its programs
// runnable) by the agents, and its parents passable: the test's temp
// dirs are 0700.
func openUp(t *testing.T, dir string) {
	t.Helper()
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		mode := fi.Mode().Perm() | 0o444
		if d.IsDir() || fi.Mode().Perm()&0o100 != 0 {
			mode |= 0o111
		}
		return os.Chmod(p, mode)
	}); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(dir); d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// modelRootfsFrom is the root file system of the container levels' model
// agents: node, bash and Claude Code with the libraries they link,
// busybox for every other tool Claude Code's Bash runs, and the clients
// at the same path as on the host (hard links), so one spec line serves
// every level.
func modelRootfsFrom(t *testing.T, clients string) string {
	t.Helper()
	return rootfsWith(t, "model-rootfs", []string{"/usr/bin/node", "/bin/bash", filepath.Join(clients, strings.TrimPrefix(claudeBin, modelsDir))},
		map[string]string{clients: modelsDir})
}

// rootfsWith is a container level's root file system named name: progs
// with the libraries they link (a program under one of trees' host
// directories is linked with its tree), busybox for every other tool, and
// each tree (host directory: its path in the root file system) linked at
// its path, so one spec line serves every level.
func rootfsWith(t *testing.T, name string, progs []string, trees map[string]string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), name)
	for _, d := range []string{"bin", "usr/bin", "tmp", "proc", "dev", "sys", "run", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	inTree := func(f string) bool {
		for dir := range trees {
			if strings.HasPrefix(f, dir+"/") {
				return true
			}
		}
		return false
	}
	for _, prog := range progs {
		real, err := filepath.EvalSymlinks(prog)
		if err != nil {
			t.Fatal(err)
		}
		files := []string{real}
		out, err := exec.Command("ldd", real).Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", real, err)
		}
		for _, m := range regexp.MustCompile(`(/\S+) \(0x`).FindAllStringSubmatch(string(out), -1) {
			files = append(files, m[1])
		}
		for _, f := range files {
			if inTree(f) {
				continue // linked with its tree below
			}
			dst := filepath.Join(root, f)
			if f == real {
				dst = filepath.Join(root, prog)
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := harness.CopyFile(f, dst, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := harness.CopyFile("/bin/busybox", filepath.Join(root, "bin/busybox"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if _, err := os.Lstat(filepath.Join(root, "bin", applet)); err != nil {
			os.Symlink("busybox", filepath.Join(root, "bin", applet))
		}
	}
	os.Symlink("/bin/bash", filepath.Join(root, "usr/bin/bash"))
	if err := os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:x:0:0:root:/:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for host, at := range trees {
		linkTree(t, host, filepath.Join(root, at))
	}
	openUp(t, root)
	return root
}

// linkTree links every file under from at the same place under to (the
// same file system as the test's temp dir; a copy where it is not).
func linkTree(t *testing.T, from, to string) {
	t.Helper()
	if err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(to, strings.TrimPrefix(p, from))
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, dst)
		}
		if err := os.Link(p, dst); err != nil {
			return harness.CopyFile(p, dst, 0o755)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// modelUpstream starts the stand-in (probe standin-serve) at
// modelUpAddr:443, in a network namespace of its own behind a veth
// pair, outside the machine as an API is; api.model.test resolves to it
// through the machine's /etc/hosts. Its CA stays in modelCADir, so a
// second start (after a reboot) serves the certificate the proxy trusts.
// All of it is the machine's, and goes with it.
func modelUpstream(t *testing.T, m *harness.Machine) {
	t.Helper()
	run(t, m, "ip", "netns", "del", "flock-model") // after a reboot, nothing; else a stale one
	mustRun(t, m, "ip", "netns", "add", "flock-model")
	mustRun(t, m, "ip", "link", "add", "flock-mod0", "type", "veth", "peer", "name", "flock-mod1", "netns", "flock-model")
	mustRun(t, m, "ip", "addr", "add", "198.51.100.1/24", "dev", "flock-mod0")
	mustRun(t, m, "ip", "link", "set", "flock-mod0", "up")
	mustRun(t, m, "ip", "-n", "flock-model", "addr", "add", modelUpAddr+"/24", "dev", "flock-mod1")
	mustRun(t, m, "ip", "-n", "flock-model", "link", "set", "flock-mod1", "up")
	mustRun(t, m, "sh", "-c", "grep -q "+modelUpName+" /etc/hosts || printf '"+modelUpAddr+" "+modelUpName+"\\n' >> /etc/hosts")
	startStandin(t, m)
	mustRun(t, m, "systemd-run", "--unit=flock-test-local-model", "--collect", probeBin, "standin-serve", localModelAddr, "-")
	m.Eventually(t, 10*time.Second, func() error {
		_, err := ledgerAt(t, m, "http://"+localModelAddr, "")
		return err
	})
}

// startStandin starts the stand-in in its namespace (again, after a test
// stopped it).
func startStandin(t *testing.T, m *harness.Machine) {
	t.Helper()
	mustRun(t, m, "systemd-run", "--unit=flock-test-standin", "--collect", "-p", "NetworkNamespacePath=/run/netns/flock-model",
		probeBin, "standin-serve", modelUpAddr+":443", modelCADir, "/etc/flock/keys/anthropic", "/etc/flock/keys/openai", "/etc/flock/keys/gemini")
	m.Eventually(t, 10*time.Second, func() error {
		_, err := standinLedger(t, m, "")
		return err
	})
}

// standinLedger is what the stand-in reported in the answers tagged tag
// ("" all).
func standinLedger(t *testing.T, m *harness.Machine, tag string) (standin.Usage, error) {
	return ledgerAt(t, m, "https://"+modelUpName, tag)
}

// ledgerAt is the ledger of the stand-in at base.
func ledgerAt(t *testing.T, m *harness.Machine, base, tag string) (standin.Usage, error) {
	t.Helper()
	var u standin.Usage
	out, _, err := run(t, m, "curl", "-sS", "--max-time", "5", "--cacert", modelCADir+"/ca.pem", base+"/standin/ledger?tag="+tag)
	if err != nil {
		return u, fmt.Errorf("the stand-in's ledger at %s: %v", base, err)
	}
	return u, json.Unmarshal([]byte(out), &u)
}

// usageOf is flockctl usage --output json in the machine.
func usageOf(t *testing.T, m *harness.Machine, args ...string) []statusview.ModelUse {
	t.Helper()
	var u statusview.Usage
	out := mustRun(t, m, append([]string{"flockctl", "usage", "--output", "json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &u); err != nil {
		t.Fatalf("flockctl usage: %v\n%s", err, out)
	}
	return u.Models
}

func tokensOf(u statusview.ModelUse) uint64 {
	return u.InputTokens + u.OutputTokens + u.CacheReadTokens + u.CacheWriteTokens
}

// sumUsage adds every row's counts, as the stand-in's ledger has them.
func sumUsage(rows []statusview.ModelUse) standin.Usage {
	var s standin.Usage
	for _, r := range rows {
		s = s.Plus(standin.Usage{Requests: r.Requests, Input: r.InputTokens, Output: r.OutputTokens, CacheRead: r.CacheReadTokens, CacheWrite: r.CacheWriteTokens})
	}
	return s
}

// regexpMatch says whether s matches pattern, . matching newlines too.
func regexpMatch(pattern, s string) bool { return regexp.MustCompile("(?s)" + pattern).MatchString(s) }

// totalUse adds every provider's counts of one agent's rows.
func totalUse(rows []statusview.ModelUse) statusview.ModelUse {
	var t statusview.ModelUse
	for _, r := range rows {
		t.Requests += r.Requests
		t.Tokens.Add(r.Tokens)
		t.Cost += r.Cost
	}
	return t
}

// sendJSON is flockctl send --output json with args: the result, even of
// a task that failed (send then exits non-zero).
func sendJSON(t *testing.T, m *harness.Machine, args ...string) (wire.Result, string, error) {
	t.Helper()
	out, stderr, err := run(t, m, append([]string{"flockctl", "send", "--output", "json"}, args...)...)
	var res wire.Result
	if jerr := json.Unmarshal([]byte(out), &res); jerr != nil && err == nil {
		err = fmt.Errorf("flockctl send --output json: %v\n%s", jerr, out)
	}
	return res, stderr, err
}
