package main

// Tier: unit (no root).

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
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
