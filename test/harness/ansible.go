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
	"slices"
	"sort"
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

// AnsiblePlayer plays one playbook against its inventory: one VM, or the
// machines of a private network (NewHostsPlayer).
type AnsiblePlayer struct {
	hosts    []string       // inventory names, as the recap has them
	program  string         // ansible-playbook
	playbook string         // from the repository's root
	vars     map[string]any // of every play
	dir      string         // inventory, vars, Ansible's own files
	env      []string
	wrap     []string // what runs the program: ip netns exec NET on a private network
	runs     int
}

// AnsibleTarget is one host of a player's inventory, in the group flock.
type AnsibleTarget struct {
	Name string // inventory_hostname
	SSH  SSHTarget
	Vars map[string]string // more variables on its line
}

// NewAnsiblePlayer is a player of playbook (a path from the repository's
// root) with the program ansible-playbook against v, with vars as extra
// vars of every play.
func NewAnsiblePlayer(t testing.TB, v *VM, program, playbook string, vars map[string]any) *AnsiblePlayer {
	t.Helper()
	return newAnsiblePlayer(t, program, playbook, vars, nil, []AnsibleTarget{{Name: AnsibleHost, SSH: v.SSH()}})
}

// NewHostsPlayer is a player of playbook against every host of h, named
// as h names them, from h's controller (in the network's namespace, as an
// operator's machine on that network); hostVars are more variables of
// each host's inventory line, by host.
func NewHostsPlayer(t testing.TB, h *Hosts, program, playbook string, vars map[string]any, hostVars map[string]map[string]string) *AnsiblePlayer {
	t.Helper()
	var targets []AnsibleTarget
	for _, name := range h.Names() {
		targets = append(targets, AnsibleTarget{Name: name, SSH: h.Target(name), Vars: hostVars[name]})
	}
	return newAnsiblePlayer(t, program, playbook, vars, h.Net.Wrap(), targets)
}

func newAnsiblePlayer(t testing.TB, program, playbook string, vars map[string]any, wrap []string, targets []AnsibleTarget) *AnsiblePlayer {
	t.Helper()
	p := &AnsiblePlayer{program: program, playbook: playbook, vars: vars, dir: t.TempDir(), wrap: wrap}
	p.env = AnsibleEnv(t, p.dir)
	inv := "[flock]\n"
	for _, h := range targets {
		s := h.SSH
		sshArgs := "-o UserKnownHostsFile=" + s.KnownHostsFile + " -o StrictHostKeyChecking=no" +
			" -o HostKeyAlgorithms=ssh-ed25519 -o IdentitiesOnly=yes -o ConnectTimeout=30"
		// Pipelining: one ssh round trip per task instead of three, which
		// the emulated VM feels; the role does not depend on it.
		inv += fmt.Sprintf("%s ansible_host=%s ansible_port=%d ansible_user=%s ansible_ssh_private_key_file=%s "+
			"ansible_python_interpreter=/usr/bin/python3 ansible_pipelining=true ansible_ssh_common_args=%q",
			h.Name, s.Host, s.Port, s.User, s.KeyFile, sshArgs)
		keys := make([]string, 0, len(h.Vars))
		for k := range h.Vars {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			inv += fmt.Sprintf(" %s=%q", k, h.Vars[k])
		}
		inv += "\n"
		p.hosts = append(p.hosts, h.Name)
	}
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
	Recap AnsibleRecap // every host's, added up
	// Recaps is each host's line of the recap.
	Recaps map[string]AnsibleRecap
	// Tasks is each task's (and handler's) outcome, by its name without
	// the role's prefix: ok, changed, skipping, fatal or failed; absent if
	// it did not run. With several hosts, the most of any host's
	// (changed over ok over skipping).
	Tasks map[string]string
	// HostTasks is Tasks by host.
	HostTasks map[string]map[string]string
}

// Play runs the playbook with the player's vars, then vars, then args,
// and reads what it printed; it fails the test if that has no PLAY RECAP
// for a host of the inventory.
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
	argv = append(append(append([]string(nil), p.wrap...), argv...), p.playbook)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	t0 := time.Now()
	out, err := RunInRepo(ctx, p.env, argv...)
	t.Logf("ansible-playbook %s: %v in %v", strings.Join(args, " "), err, time.Since(t0).Round(time.Second))
	r := AnsibleRun{Out: out, Err: err, Recaps: map[string]AnsibleRecap{}, HostTasks: parseHostTasks(out)}
	r.Tasks = mergeTasks(r.HostTasks)
	for _, h := range limited(p.hosts, args) {
		rc, ok := parseRecap(out, h)
		if !ok {
			t.Fatalf("ansible-playbook printed no PLAY RECAP for %s (%v):\n%s", h, err, out)
		}
		r.Recaps[h] = rc
		r.Recap = r.Recap.add(rc)
	}
	return r
}

// limited are the hosts a play with args runs on: all, or those its
// --limit (-l) names (a comma-separated list of host names).
func limited(hosts, args []string) []string {
	for i, a := range args {
		var list string
		switch {
		case (a == "--limit" || a == "-l") && i+1 < len(args):
			list = args[i+1]
		case strings.HasPrefix(a, "--limit="):
			list = strings.TrimPrefix(a, "--limit=")
		default:
			continue
		}
		var out []string
		for _, h := range hosts {
			if slices.Contains(strings.Split(list, ","), h) {
				out = append(out, h)
			}
		}
		return out
	}
	return hosts
}

func (a AnsibleRecap) add(b AnsibleRecap) AnsibleRecap {
	return AnsibleRecap{a.OK + b.OK, a.Changed + b.Changed, a.Unreachable + b.Unreachable, a.Failed + b.Failed,
		a.Skipped + b.Skipped, a.Rescued + b.Rescued, a.Ignored + b.Ignored}
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

var taskRank = map[string]int{"skipping": 1, "ok": 2, "changed": 3, "failed": 4, "fatal": 5}

// parseHostTasks reads each task's outcome on each host from the default
// callback's output, the controller's own (localhost) aside. A looped
// task is changed if any item is, fatal if any fails; a delegated one
// ("[b -> a]") is the host's it ran for.
func parseHostTasks(out string) map[string]map[string]string {
	hosts := map[string]map[string]string{}
	name := ""
	for _, l := range strings.Split(out, "\n") {
		if m := headRe.FindStringSubmatch(l); m != nil {
			name = m[1]
			continue
		}
		m := resultRe.FindStringSubmatch(l)
		if m == nil || name == "" {
			continue
		}
		host, _, _ := strings.Cut(m[2], " -> ")
		if host == "localhost" {
			continue
		}
		if hosts[host] == nil {
			hosts[host] = map[string]string{}
		}
		if taskRank[m[1]] > taskRank[hosts[host][name]] {
			hosts[host][name] = m[1]
		}
	}
	return hosts
}

// mergeTasks is each task's highest outcome over the hosts.
func mergeTasks(hosts map[string]map[string]string) map[string]string {
	tasks := map[string]string{}
	for _, ht := range hosts {
		for name, r := range ht {
			if taskRank[r] > taskRank[tasks[name]] {
				tasks[name] = r
			}
		}
	}
	return tasks
}

// parseTasks is parseHostTasks merged over the hosts.
func parseTasks(out string) map[string]string { return mergeTasks(parseHostTasks(out)) }
