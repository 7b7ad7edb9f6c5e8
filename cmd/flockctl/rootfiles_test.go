package main

// Unit tier: provision's check of the files only root may read, on
// files in a temporary directory.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flockrun/flock/spec"
)

// A granted secret's file readable by others, or missing, is refused
// naming the field and the fix; one no agent is granted is not this
// host's to check.
func TestRootFilesRefusesASecretOthersRead(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the files must be root's to pass")
	}
	d := t.TempDir()
	good, loose := filepath.Join(d, "good"), filepath.Join(d, "loose")
	os.WriteFile(good, []byte("tok\n"), 0o600)
	os.WriteFile(loose, []byte("tok\n"), 0o644)
	for _, tc := range []struct {
		name, file, grant, want string
	}{
		{"root's", good, "secrets: [github]", ""},
		{"readable by others", loose, "secrets: [github]", "secrets[0].file: " + loose + " is readable or writable by others (mode 0644)"},
		{"missing", filepath.Join(d, "none"), "secrets: [github]", "secrets[0].file: " + filepath.Join(d, "none") + ": no such file or directory; write the secret there"},
		{"not granted", loose, "env: {A: b}", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := spec.Parse([]byte(`secrets:
  - {name: github, file: ` + tc.file + `, hosts: ["api.github.com:443"], env: [GH_TOKEN]}
agents:
  - {id: 1, egress: ["api.github.com:443"], ` + tc.grant + `}
`))
			if err != nil {
				t.Fatal(err)
			}
			err = rootFiles(f, f.Agents, "flock.yaml")
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "flock.yaml: "+tc.want)):
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
