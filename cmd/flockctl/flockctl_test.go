package main

// Tier: unit (no root).

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flockrun/flock/explain"
)

func TestTailFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "1.log")
	os.WriteFile(p, []byte("a\nb\nc\nd\n"), 0o600)
	var out bytes.Buffer
	off, err := tailFile(&out, p, 2, 0)
	if err != nil || out.String() != "c\nd\n" || off != 8 {
		t.Fatalf("last 2 lines: %q, off %d, %v", out.String(), off, err)
	}
	// Follow: only what was appended since.
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("e\n")
	f.Close()
	out.Reset()
	if off, err = tailFile(&out, p, -1, off); err != nil || out.String() != "e\n" || off != 10 {
		t.Fatalf("follow: %q, off %d, %v", out.String(), off, err)
	}
	// Truncated (rotated): start again from the top.
	os.WriteFile(p, []byte("x\n"), 0o600)
	out.Reset()
	if _, err = tailFile(&out, p, -1, off); err != nil || out.String() != "x\n" {
		t.Fatalf("after truncation: %q, %v", out.String(), err)
	}
	// Missing: empty, not an error (the agent has not logged yet).
	out.Reset()
	if _, err := tailFile(&out, filepath.Join(t.TempDir(), "none"), 10, 0); err != nil || out.Len() != 0 {
		t.Fatalf("missing file: %q, %v", out.String(), err)
	}
}

// explain needs neither root nor systemd: it only plans.
func TestExplainPrintsTheUnit(t *testing.T) {
	var out bytes.Buffer
	cmd := newRoot()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"explain", "--agents", "3", "2"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"# flock-agent@2.service: user flock-2 (uid 2000000002), role worker, level process: process isolation with guardrails",
		"User=flock-2", "ProtectSystem=strict", "MemoryMax=268435456",
	} {
		if !bytes.Contains(out.Bytes(), []byte(want)) {
			t.Errorf("explain lacks %q:\n%s", want, out.String())
		}
	}
	if bytes.Contains(out.Bytes(), []byte("flock-agent@1.service")) {
		t.Errorf("explain 2 printed agent 1 too")
	}
}

// explain and provision say when a spec lets an agent reach this host.
func TestExplainWarnsOfHostAllowances(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "flock.yaml")
	if err := os.WriteFile(spec, []byte("agents:\n  - id: 3\n    egress: [\"0.0.0.0/0:*\", \"127.0.0.1:8080\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	cmd := newRoot()
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"explain", "-f", spec})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	want := "warning: agent 3 may reach 127.0.0.1:8080/tcp on this host: egress[1] names a loopback address explicitly\n"
	if errOut.String() != want {
		t.Errorf("explain's stderr:\n got %q\nwant %q", errOut.String(), want)
	}
}

// The live form's arguments are checked before the host is read; each
// refusal names what to type instead.
func TestExplainRefusesBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"explain"}, "name the agent: flockctl explain ID"},
		{[]string{"explain", "x"}, `agent "x": an id is a positive number`},
		{[]string{"explain", "0"}, `agent "0": an id is a positive number`},
		{[]string{"explain", "1", "--output", "yaml"}, `--output "yaml": choose text or json`},
	} {
		cmd := newRoot()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(tc.args)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// The spec form names an agent's names and the proxy they go through,
// apart from its unit (whose firewall allowances are addresses only); an
// agent without names gets no such line.
func TestExplainSpecNames(t *testing.T) {
	file := filepath.Join(t.TempDir(), "flock.yaml")
	specText := "agents:\n  - id: 1\n    egress: [\"10.1.2.0/24:443\", \"api.example.com:443\", \"*.example.org:8443\"]\n  - id: 2\n"
	if err := os.WriteFile(file, []byte(specText), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		want string // "": no names line
	}{
		{"1", "# names (through flock-proxy on 127.0.0.1:4230): api.example.com:443 *.example.org:8443\n"},
		{"2", ""},
	} {
		var out bytes.Buffer
		cmd := newRoot()
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"explain", "-f", file, tc.id})
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		if tc.want != "" && !strings.Contains(out.String(), tc.want) {
			t.Errorf("explain %s lacks %q:\n%s", tc.id, tc.want, out.String())
		}
		if tc.want == "" && strings.Contains(out.String(), "# names") {
			t.Errorf("explain %s (no names) prints names:\n%s", tc.id, out.String())
		}
	}
}

// A verb's body runs without cobra: its options and where it writes.
func TestRunExplainWithoutCobra(t *testing.T) {
	var out, errOut bytes.Buffer
	o := explainOpts{stdio: stdio{out: &out, errOut: &errOut}, output: "text", count: 2, args: []string{"1"}}
	if err := runExplain(context.Background(), o); err != nil || !strings.Contains(out.String(), "# flock-agent@1.service") {
		t.Errorf("runExplain: %v\n%s", err, out.String())
	}
	o.output = "yaml"
	if err := runExplain(context.Background(), o); err == nil || err.Error() != `--output "yaml": choose text or json` {
		t.Errorf("--output yaml: %v", err)
	}
}

// The spec form prints JSON too: a list of explain.Planned, one per
// agent, or the one asked for.
func TestExplainSpecJSON(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		agents []int
	}{
		{[]string{"explain", "--agents", "2", "-o", "json"}, []int{1, 2}},
		{[]string{"explain", "--agents", "2", "-o", "json", "2"}, []int{2}},
	} {
		out, err := runRoot(t, tc.args...)
		var got []explain.Planned
		if err != nil || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("%q: %v\n%s", tc.args, err, out)
		}
		var ids []int
		for _, p := range got {
			ids = append(ids, p.Agent)
		}
		if !slices.Equal(ids, tc.agents) {
			t.Errorf("%q: agents %v, want %v", tc.args, ids, tc.agents)
		}
	}
}
