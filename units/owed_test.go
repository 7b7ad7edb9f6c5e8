package units

// Tier: unit (files in a temporary directory; no systemd).

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"
)

// A restart owed is marked, seen and cleared; a template, which has no
// run of its own, owes none.
func TestRestartOwedMarks(t *testing.T) {
	s := &Systemd{OwedDir: t.TempDir() + "/owed"}
	for _, name := range []string{BusUnit, ProxyUnit} {
		if owed, err := s.owed(name); owed || err != nil {
			t.Fatalf("%s owed before any mark: %v %v", name, owed, err)
		}
	}
	if err := s.OweRestart(context.Background(), ProxyUnit); err != nil {
		t.Fatal(err)
	}
	if owed, err := s.owed(ProxyUnit); !owed || err != nil {
		t.Errorf("%s not owed after its mark: %v", ProxyUnit, err)
	}
	if owed, _ := s.owed(BusUnit); owed {
		t.Errorf("%s owed by %s's mark", BusUnit, ProxyUnit)
	}
	if err := s.paid(ProxyUnit); err != nil {
		t.Fatal(err)
	}
	if owed, _ := s.owed(ProxyUnit); owed {
		t.Errorf("%s still owed once paid", ProxyUnit)
	}
	if err := s.paid(ProxyUnit); err != nil {
		t.Errorf("paid twice: %v", err)
	}
	if _, err := os.Stat(s.OwedDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the marks' directory outlives its last mark: %v", err)
	}
	if err := s.OweRestart(context.Background(), CountersTemplate); err == nil {
		t.Errorf("a template owes a restart")
	}
	if err := s.OweRestart(context.Background(), "sshd.service"); err == nil {
		t.Errorf("a unit not flock's owes a restart")
	}
}
