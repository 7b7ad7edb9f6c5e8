package test

// The Vagrantfile at the repository's root (tier: tools). No provider can
// boot a box on the machines flock is tested on, so this checks what
// `vagrant validate` can, and that what it cannot (the files it names)
// exists; the playbook it runs is tested against a VM in ansible_test.go.

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestVagrantfileValidates runs `vagrant validate` in the repository's
// root, with a Vagrant home and machine directory of its own so it leaves
// nothing behind.
//
// Tier: tools (vagrant; skipped without it, failed in CI).
func TestVagrantfileValidates(t *testing.T) {
	vagrant := requireProgram(t, "vagrant", "vagrant")
	dir := t.TempDir()
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VAGRANT_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"VAGRANT_HOME="+filepath.Join(dir, "home"),
		"VAGRANT_DOTFILE_PATH="+filepath.Join(dir, "dot"),
		"VAGRANT_CHECKPOINT_DISABLE=1", // no version check over the network
		"VAGRANT_NO_COLOR=1",
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := runInRepo(ctx, env, vagrant, "validate")
	if err != nil && strings.Contains(out, "isn't usable on this system") {
		// No provider is installed that vagrant deems usable (Debian's
		// vagrant-libvirt is one): check all but the providers' blocks.
		t.Logf("vagrant validate: no usable provider here, so without the providers' settings:\n%s", out)
		out, err = runInRepo(ctx, env, vagrant, "validate", "--ignore-provider")
	}
	if err != nil || !strings.Contains(out, "Vagrantfile validated successfully") {
		t.Fatalf("vagrant validate: %v\n%s", err, out)
	}

	// vagrant validate checks the provisioner's settings, not that the
	// playbook is there, nor that the machine is in the group it plays on.
	vf, err := os.ReadFile(inRepo(t, "Vagrantfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*ansible\.playbook\s*=\s*"([^"]+)"`).FindSubmatch(vf)
	if m == nil {
		t.Fatalf("Vagrantfile has no ansible.playbook")
	}
	if _, err := os.Stat(inRepo(t, string(m[1]))); err != nil {
		t.Errorf("Vagrantfile's playbook: %v", err)
	}
	for _, want := range []string{
		`config.vm.box = "debian/bookworm64"`,
		`config.vm.define "flock-vm"`,
		`ansible.groups = { "flock" => ["flock-vm"] }`,
		`flock_bin_dir: File.join(__dir__, "bin")`,
	} {
		if !strings.Contains(string(vf), want) {
			t.Errorf("Vagrantfile lacks %s", want)
		}
	}
}
