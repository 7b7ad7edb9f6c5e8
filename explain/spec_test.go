package explain

// Tier: unit (a spec, no host).

import (
	"bytes"
	"testing"

	"github.com/flockrun/flock/spec"
)

// The spec form names the walls a level cannot close on the kernel:
// abstract sockets at process and podman without Landlock scopes, none at
// gvisor, none with scopes.
func TestWriteSpecPrintsGaps(t *testing.T) {
	f, err := spec.Parse([]byte("agents:\n  - id: 1\n  - id: 2\n    level: podman\n    rootfs: /var/lib/flock-rootfs/debian\n" +
		"  - id: 3\n    level: gvisor\n    rootfs: /var/lib/flock-rootfs/debian\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []Kernel{KernelFacts("6.1.0", 3), KernelFacts("6.12.0", 6)} {
		var out bytes.Buffer
		WriteSpec(&out, f, "", k)
		for _, level := range []string{"process", "podman", "gvisor"} {
			line := "# OPEN at level " + level + " on this host: abstract UNIX sockets: the agent shares the host's network namespace"
			if want := !k.IPCScopes && level != "gvisor"; bytes.Contains(out.Bytes(), []byte(line)) != want {
				t.Errorf("kernel %s, level %s: gap printed %v, want %v:\n%s", k.Release, level, !want, want, out.String())
			}
		}
	}
}
