package units

// Tier: unit.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindPrograms(t *testing.T) {
	root := t.TempDir()
	local, usr, src := filepath.Join(root, "usr/local/bin"), filepath.Join(root, "usr/bin"), filepath.Join(root, "src/bin")
	dirs := []string{local, usr}
	put := func(t *testing.T, dir string, names ...string) {
		t.Helper()
		for _, n := range names {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, n), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	both := []string{"flockctl", "flock-agent"}
	for _, tc := range []struct {
		name     string
		installs map[string][]string // dir -> programs in it
		self     string
		want     string // the directory chosen; "" an error
	}{
		{"the package alone, run from /usr/bin", map[string][]string{usr: both}, usr + "/flockctl", usr},
		{"the package alone, run from a checkout", map[string][]string{usr: both, src: both}, src + "/flockctl", usr},
		{"make install alone", map[string][]string{local: both}, local + "/flockctl", local},
		{"both, run from /usr/bin", map[string][]string{local: both, usr: both}, usr + "/flockctl", usr},
		{"both, run from /usr/local/bin", map[string][]string{local: both, usr: both}, local + "/flockctl", local},
		{"both, run from elsewhere: PATH's order", map[string][]string{local: both, usr: both}, "", local},
		{"flock-agent missing beside self", map[string][]string{usr: {"flockctl"}, local: both}, usr + "/flockctl", local},
		{"half an install in each", map[string][]string{usr: {"flockctl"}, local: {"flock-agent"}}, usr + "/flockctl", ""},
		{"nothing installed", nil, src + "/flockctl", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.RemoveAll(filepath.Join(root, "usr"))
			os.RemoveAll(filepath.Join(root, "src"))
			for dir, names := range tc.installs {
				put(t, dir, names...)
			}
			p, err := FindPrograms(tc.self, dirs)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), "install the flock package") {
					t.Fatalf("FindPrograms = %+v, %v; want an error naming the fix", p, err)
				}
				return
			}
			if err != nil || p.Flockctl != tc.want+"/flockctl" || p.Agent != tc.want+"/flock-agent" {
				t.Fatalf("FindPrograms = %+v, %v; want both in %s", p, err, tc.want)
			}
		})
	}
	// Not executable is not installed.
	os.RemoveAll(filepath.Join(root, "usr"))
	put(t, usr, both...)
	os.Chmod(filepath.Join(usr, "flock-agent"), 0o644)
	if p, err := FindPrograms(usr+"/flockctl", dirs); err == nil {
		t.Errorf("a flock-agent without x bits counts as installed: %+v", p)
	}
}
