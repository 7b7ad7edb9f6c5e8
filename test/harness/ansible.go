package harness

// Ansible as the tests run it: ansible-core alone, with nothing of the
// developer's configuration, from the repository's root; and a playbook
// played against a VM over ssh, as an operator would from this machine,
// its outcome read per task and from the PLAY RECAP.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// AnsibleEnv is the environment of every ansible command of the tests:
// an empty config of its own (no ansible.cfg of the developer's), no
// colour, and no collection but what ansible-core ships, as on a host
// with only Debian's ansible-core (CI), so a module from anywhere else
// fails here too. Everything Ansible writes goes under dir.
func AnsibleEnv(t testing.TB, dir string) []string {
	t.Helper()
	cfg := filepath.Join(dir, "ansible.cfg")
	if err := os.WriteFile(cfg, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ANSIBLE_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"ANSIBLE_CONFIG="+cfg,
		"ANSIBLE_HOME="+filepath.Join(dir, "home"),
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(dir, "tmp"),
		"ANSIBLE_COLLECTIONS_PATH="+filepath.Join(dir, "collections"),
		"ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=False",
		"ANSIBLE_NOCOLOR=1",
		"ANSIBLE_NOCOWS=1",
		"ANSIBLE_RETRY_FILES_ENABLED=False",
		"ANSIBLE_STDOUT_CALLBACK=default",
		"ANSIBLE_DISPLAY_SKIPPED_HOSTS=True",
	)
}

// RunInRepo runs argv in the repository's root with env and returns its
// stdout and stderr together. ctx bounds it.
func RunInRepo(ctx context.Context, env []string, argv ...string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = root
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("cd %s && %s: %w", root, quoteArgv(argv), err)
	}
	return out.String(), nil
}

// AnsibleHost is the VM's name in an AnsiblePlayer's inventory.
const AnsibleHost = "flockvm"

// AnsiblePlayer plays one playbook against one VM.
type AnsiblePlayer struct {
	vm       *VM
	program  string         // ansible-playbook
	playbook string         // from the repository's root
	vars     map[string]any // of every play
	dir      string         // inventory, vars, Ansible's own files
	env      []string
	runs     int
}

// NewAnsiblePlayer is a player of playbook (a path from the repository's
// root) with the program ansible-playbook against v, with vars as extra
// vars of every play.
func NewAnsiblePlayer(t testing.TB, v *VM, program, playbook string, vars map[string]any) *AnsiblePlayer {
	t.Helper()
	p := &AnsiblePlayer{vm: v, program: program, playbook: playbook, vars: vars, dir: t.TempDir()}
	p.env = AnsibleEnv(t, p.dir)
	s := v.SSH()
	sshArgs := "-o UserKnownHostsFile=" + s.KnownHostsFile + " -o StrictHostKeyChecking=no" +
		" -o HostKeyAlgorithms=ssh-ed25519 -o IdentitiesOnly=yes -o ConnectTimeout=30"
	// Pipelining: one ssh round trip per task instead of three, which
	// the emulated VM feels; the role does not depend on it.
	inv := fmt.Sprintf("[flock]\n%s ansible_host=%s ansible_port=%d ansible_user=%s ansible_ssh_private_key_file=%s "+
		"ansible_python_interpreter=/usr/bin/python3 ansible_pipelining=true ansible_ssh_common_args=%q\n",
		AnsibleHost, s.Host, s.Port, s.User, s.KeyFile, sshArgs)
	if err := os.WriteFile(filepath.Join(p.dir, "hosts"), []byte(inv), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// AnsibleRecap is one host's line of the PLAY RECAP.
type AnsibleRecap struct {
	OK, Changed, Unreachable, Failed, Skipped, Rescued, Ignored int
}

// AnsibleRun is the outcome of one ansible-playbook.
type AnsibleRun struct {
	Out   string // stdout and stderr
	Err   error
	Recap AnsibleRecap
	// Tasks is each task's (and handler's) outcome for the host, by its
	// name without the role's prefix: ok, changed, skipping, fatal or
	// failed; absent if it did not run.
	Tasks map[string]string
}

// Play runs the playbook with the player's vars, then vars, then args,
// and reads what it printed; it fails the test if that has no PLAY RECAP
// for the VM.
func (p *AnsiblePlayer) Play(t testing.TB, vars map[string]any, args ...string) AnsibleRun {
	t.Helper()
	p.runs++
	all := map[string]any{}
	for _, m := range []map[string]any{p.vars, vars} {
		for k, v := range m {
			all[k] = v
		}
	}
	b, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	varsFile := filepath.Join(p.dir, fmt.Sprintf("vars-%d.json", p.runs))
	if err := os.WriteFile(varsFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{p.program, "-i", filepath.Join(p.dir, "hosts"), "-e", "@" + varsFile}, args...)
	argv = append(argv, p.playbook)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	t0 := time.Now()
	out, err := RunInRepo(ctx, p.env, argv...)
	t.Logf("ansible-playbook %s: %v in %v", strings.Join(args, " "), err, time.Since(t0).Round(time.Second))
	r := AnsibleRun{Out: out, Err: err, Tasks: parseTasks(out)}
	var ok bool
	if r.Recap, ok = parseRecap(out, AnsibleHost); !ok {
		t.Fatalf("ansible-playbook printed no PLAY RECAP for %s (%v):\n%s", AnsibleHost, err, out)
	}
	return r
}

// MustSucceed fails the test unless the play ran without a failure or
// an unreachable host.
func (r AnsibleRun) MustSucceed(t testing.TB) {
	t.Helper()
	if r.Err != nil || r.Recap.Failed != 0 || r.Recap.Unreachable != 0 {
		t.Fatalf("ansible-playbook: %v, recap %+v\n%s", r.Err, r.Recap, r.Out)
	}
}

// AssertTasks checks what each named task did: changed, ok, skipping...
func (r AnsibleRun) AssertTasks(t testing.TB, want map[string]string) {
	t.Helper()
	for task, w := range want {
		if got := r.Tasks[task]; got != w {
			t.Errorf("task %q: %q, want %q\n%s", task, got, w, r.Out)
		}
	}
}

// Section is what the play printed for the task name, up to the next
// task, handler or the recap; "" if the task did not run.
func (r AnsibleRun) Section(name string) string {
	i := strings.Index(r.Out, name+"] *")
	if i < 0 {
		return ""
	}
	s := r.Out[i:]
	for _, next := range []string{"\nTASK [", "\nRUNNING HANDLER [", "\nPLAY RECAP"} {
		if j := strings.Index(s, next); j >= 0 {
			s = s[:j]
		}
	}
	return s
}

var (
	recapRe  = regexp.MustCompile(`(?m)^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)\s+skipped=(\d+)\s+rescued=(\d+)\s+ignored=(\d+)`)
	headRe   = regexp.MustCompile(`(?m)^(?:TASK|RUNNING HANDLER) \[(?:[^\]:]+ : )?(.+?)\] \*+$`)
	resultRe = regexp.MustCompile(`^(ok|changed|skipping|fatal|failed): \[([^\]]+)\]`)
)

// parseRecap reads host's line of the PLAY RECAP.
func parseRecap(out, host string) (AnsibleRecap, bool) {
	i := strings.LastIndex(out, "PLAY RECAP")
	if i < 0 {
		return AnsibleRecap{}, false
	}
	for _, m := range recapRe.FindAllStringSubmatch(out[i:], -1) {
		if m[1] != host {
			continue
		}
		n := make([]int, 7)
		for k := range n {
			n[k], _ = strconv.Atoi(m[k+2])
		}
		return AnsibleRecap{n[0], n[1], n[2], n[3], n[4], n[5], n[6]}, true
	}
	return AnsibleRecap{}, false
}

// parseTasks reads each task's outcome from the default callback's
// output, the controller's own (localhost) aside. A looped task is
// changed if any item is, fatal if any fails.
func parseTasks(out string) map[string]string {
	rank := map[string]int{"skipping": 1, "ok": 2, "changed": 3, "failed": 4, "fatal": 5}
	tasks := map[string]string{}
	name := ""
	for _, l := range strings.Split(out, "\n") {
		if m := headRe.FindStringSubmatch(l); m != nil {
			name = m[1]
			continue
		}
		if m := resultRe.FindStringSubmatch(l); m != nil && name != "" && m[2] != "localhost" {
			if rank[m[1]] > rank[tasks[name]] {
				tasks[name] = m[1]
			}
		}
	}
	return tasks
}
