package events

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockrun/flock/internal/golden"
)

// TestJournalLines: journal entries captured from the system tests
// (`journalctl -o json` with the source's matches, FLOCK_CAPTURE_JOURNAL)
// through Map and fold give the events in the golden file beside them:
// testdata/nspawn.jsonl is TestEvents' machine (starts, a bus violation,
// agent 1 killed and restarted, agent 2 stopped by hand and its drift
// repaired, other units), testdata/vm-oom.jsonl TestVMEnforcesLimits's VM (a
// hog OOM-killed and restarted under MemoryMax, the kernel's lines).
//
// Tier: unit (no root).
func TestJournalLines(t *testing.T) {
	files, err := filepath.Glob("testdata/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no captured journal in testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			j := &JournalSource{UIDBase: testUIDBase, fold: newFold(nil)}
			var b bytes.Buffer
			if err := j.read(bytes.NewReader(data), func(e Event) error {
				line, err := e.Encode()
				b.Write(line)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if j.cursor == "" {
				t.Errorf("no cursor kept from %s", f)
			}
			golden.Check(t, strings.TrimSuffix(f, ".jsonl")+".events", b.String())
		})
	}
}
