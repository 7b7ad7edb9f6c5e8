package harness

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// playOut is ansible-playbook's default callback as the role's plays
// print it: a role's prefix, a looped task, a fatal one, a handler, the
// controller's own task, and a recap with another host.
const playOut = `PLAY [flock] *******************************************************************

TASK [Gathering Facts] *********************************************************
ok: [flockvm]

TASK [flock : Install flockctl in /usr/local/bin] ******************************
changed: [flockvm]

TASK [flock : Install the missing Debian packages] *****************************
skipping: [flockvm]

TASK [flock : Install the units] ***********************************************
ok: [flockvm] => (item=flock.service)
changed: [flockvm] => (item=flock-agent@.service)
ok: [flockvm] => (item=flock.target)

TASK [flock : Say why the spec was refused] ************************************
fatal: [flockvm]: FAILED! => {"msg": "agents[1].limits.memory: \"lots\" is not a size"}

TASK [Render on the controller] ************************************************
changed: [localhost]

RUNNING HANDLER [flock : Restart flock.service] ********************************
changed: [flockvm]

PLAY RECAP *********************************************************************
flockvm                    : ok=5    changed=3    unreachable=0    failed=1    skipped=1    rescued=0    ignored=0
other                      : ok=1    changed=0    unreachable=1    failed=0    skipped=0    rescued=0    ignored=0
`

func TestParseRecap(t *testing.T) {
	if got, ok := parseRecap(playOut, "flockvm"); !ok || got != (AnsibleRecap{OK: 5, Changed: 3, Failed: 1, Skipped: 1}) {
		t.Errorf("flockvm: %+v, %v", got, ok)
	}
	if got, ok := parseRecap(playOut, "other"); !ok || got != (AnsibleRecap{OK: 1, Unreachable: 1}) {
		t.Errorf("other: %+v, %v", got, ok)
	}
	if _, ok := parseRecap(playOut, "flock"); ok {
		t.Errorf("a host not in the recap was found")
	}
	// A recap's line before the last PLAY RECAP is another play's.
	before, _, _ := strings.Cut(playOut, "PLAY RECAP")
	if _, ok := parseRecap(before, "flockvm"); ok {
		t.Errorf("found a recap in output without PLAY RECAP")
	}
}

func TestParseTasks(t *testing.T) {
	want := map[string]string{
		"Gathering Facts":                     "ok",
		"Install flockctl in /usr/local/bin":  "changed",
		"Install the missing Debian packages": "skipping",
		"Install the units":                   "changed",
		"Say why the spec was refused":        "fatal",
		"Restart flock.service":               "changed",
		// The controller's own task is not the host's.
	}
	if got := parseTasks(playOut); !reflect.DeepEqual(got, want) {
		t.Errorf("parseTasks:\n got %v\nwant %v", got, want)
	}
}

func TestAnsibleRunSection(t *testing.T) {
	r := AnsibleRun{Out: playOut}
	if s := r.Section("Say why the spec was refused"); !strings.HasPrefix(s, "Say why the spec was refused] *") ||
		!strings.Contains(s, `is not a size`) || strings.Contains(s, "Render on the controller") {
		t.Errorf("section up to the next task: %q", s)
	}
	if s := r.Section("Restart flock.service"); !strings.Contains(s, "changed: [flockvm]") || strings.Contains(s, "PLAY RECAP") {
		t.Errorf("a handler's section, up to the recap: %q", s)
	}
	if s := r.Section("Not a task"); s != "" {
		t.Errorf("a task that did not run: %q", s)
	}
}

// TestParseHostTasks reads a play on several hosts: a task run once and
// delegated to the first host, a looped one per host, a skipped one.
func TestParseHostTasks(t *testing.T) {
	const out = `TASK [flock : Make the cluster's certificates (once, on the first host)] ***
changed: [a -> a]

TASK [flock : Fetch this host's cluster files from the first host] ***
ok: [a -> a] => (item=ca.crt)
ok: [b -> a] => (item=ca.crt)
ok: [c -> a] => (item=ca.crt)

TASK [flock : Install this host's cluster files] ***
changed: [b] => (item=ca.crt)
ok: [a] => (item=ca.crt)
skipping: [c]
`
	want := map[string]map[string]string{
		"a": {"Make the cluster's certificates (once, on the first host)": "changed", "Fetch this host's cluster files from the first host": "ok", "Install this host's cluster files": "ok"},
		"b": {"Fetch this host's cluster files from the first host": "ok", "Install this host's cluster files": "changed"},
		"c": {"Fetch this host's cluster files from the first host": "ok", "Install this host's cluster files": "skipping"},
	}
	if got := parseHostTasks(out); !reflect.DeepEqual(got, want) {
		t.Errorf("parseHostTasks:\n got %v\nwant %v", got, want)
	}
	if got := parseTasks(out)["Install this host's cluster files"]; got != "changed" {
		t.Errorf("merged: %q, want changed", got)
	}
}

// TestLimited: a play's --limit names the hosts whose recap it prints.
func TestLimited(t *testing.T) {
	hosts := []string{"a", "b", "c"}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, hosts},
		{[]string{"--check"}, hosts},
		{[]string{"--limit", "a"}, []string{"a"}},
		{[]string{"-l", "c,a"}, []string{"a", "c"}},
		{[]string{"--diff", "--limit=b"}, []string{"b"}},
	} {
		if got := limited(hosts, tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("limited(%v): %v, want %v", tc.args, got, tc.want)
		}
	}
}
