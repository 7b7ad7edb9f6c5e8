package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockrun/flock/plan"
)

// Who may read the flock without root, and what the rest are told: a
// member of the readers' group reads the reader's credential; one who
// may not is told how to join; a host with no flock, or a flock from
// before the reader, says so.
//
// Tier: unit (no root; the refusal of one who may not read the
// credential needs a process that is not root).
func TestCanRead(t *testing.T) {
	dir := t.TempDir()
	cred, state, none := filepath.Join(dir, "reader.nk"), filepath.Join(dir, "applied.json"), filepath.Join(dir, "none")
	secret := filepath.Join(dir, "operator.nk")
	for path, mode := range map[string]os.FileMode{cred: 0o640, state: 0o640, secret: 0o000} {
		if err := os.WriteFile(path, []byte("x\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name        string
		cred, state string
		want        error  // errors.Is, or
		says        string // in the error
		notRoot     bool
	}{
		{"a member of the group", cred, state, nil, "", false},
		{"no flock provisioned", none, none, plan.ErrNoState, "run flockctl provision first", false},
		{"a flock provisioned before the reader", none, state, nil, "provision again as root", false},
		{"one not in the group", secret, state, errNotReader, "sudo usermod -aG flock-readers $USER", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.notRoot && os.Geteuid() == 0 {
				t.Skip("root reads every file")
			}
			err := canRead(tc.cred, tc.state)
			switch {
			case tc.want == nil && tc.says == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Errorf("error %v, want %v", err, tc.want)
			case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
				t.Errorf("error %v, want one saying %q", err, tc.says)
			}
		})
	}
	if want := "add yourself to flock-readers (sudo usermod -aG flock-readers $USER, then log in again) or use sudo"; errNotReader.Error() != want {
		t.Errorf("the sentence is %q, want %q", errNotReader, want)
	}
}
