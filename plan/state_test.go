package plan

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The state the readers' group reads: StateMode, its directory's group,
// and no secret in it: a model API's key is named by its file, never
// copied in.
//
// Tier: unit (no root).
func TestStateIsTheReadersAndHoldsNoSecret(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "anthropic.key")
	const secret = "sk-ant-not-for-the-readers"
	if err := os.WriteFile(keyFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := mustParse(t, `providers:
  - {name: anthropic, kind: anthropic, url: "https://api.anthropic.com", key_file: `+keyFile+`}
agents:
  - id: 1
    models: {anthropic: {}}
`)
	path := filepath.Join(dir, "state", "applied.json")
	if err := os.Mkdir(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	// The directory's group is not the one files get by default (the
	// process's), so the file has it only if SaveState gave it.
	if gid, ok := otherGroup(); ok {
		if err := os.Chown(filepath.Dir(path), -1, gid); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Log("no group but the process's to give the directory: its group is not proven")
	}
	for range 2 { // written, then replaced
		if err := SaveState(path, f); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	di, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != StateMode {
		t.Errorf("mode %v, want %v", fi.Mode().Perm(), StateMode)
	}
	if got, want := fi.Sys().(*syscall.Stat_t).Gid, di.Sys().(*syscall.Stat_t).Gid; got != want {
		t.Errorf("group %d, want its directory's %d", got, want)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), secret) || !strings.Contains(string(data), keyFile) {
		t.Errorf("the state should name the key's file and hold no key:\n%s", data)
	}
	if back, err := LoadState(path); err != nil || len(back.Agents) != 1 {
		t.Errorf("LoadState: %v, %v", back, err)
	}
}

// otherGroup is a group this process may give a file it owns that is not
// its own: any as root, else one of its supplementary groups.
func otherGroup() (int, bool) {
	if os.Geteuid() == 0 {
		return 4242, true
	}
	groups, _ := os.Getgroups()
	for _, g := range groups {
		if g != os.Getegid() {
			return g, true
		}
	}
	return 0, false
}
