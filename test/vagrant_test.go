package test

// The Vagrantfile at the repository's root (tier: tools). No provider can
// boot a box on the machines flock is tested on, so this checks what
// `vagrant validate` can, and that what it cannot (the files it names)
// exists; the playbook it runs is tested against a VM in ansible_test.go.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flockrun/flock/test/harness"
)

// baseConfig names the part of a Vagrantfile outside its provider blocks.
const baseConfig = "all but the providers"

// vagrantCheck is one validation of a Vagrantfile.
type vagrantCheck struct {
	vagrant string
	env     []string // the situation: which plugins vagrant loads
	// vboxStandIn puts a VBoxManage that answers --version on PATH where
	// VirtualBox is not installed: vagrant then deems its built-in
	// VirtualBox provider usable and validates that block with its own
	// config class. Without it, that provider is unusable here.
	vboxStandIn bool
}

// validate checks the Vagrantfile in dir with vagrant's own rules,
// whatever providers the machine has: the file without its provider
// blocks (--ignore-provider, which alone would pass any provider block),
// then each provider block the file has, with that provider made the
// default. A block whose provider vagrant does not know, or deems
// unusable, is returned in unchecked with vagrant's words; any other
// failure is an error, so a file that does not validate is never passed.
func (c vagrantCheck) validate(ctx context.Context, dir string) (checked []string, unchecked map[string]string, err error) {
	vf, err := os.ReadFile(filepath.Join(dir, "Vagrantfile"))
	if err != nil {
		return nil, nil, err
	}
	home, err := os.MkdirTemp("", "flock-vagrant-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(home)
	env := append(slices.Clone(c.env),
		"VAGRANT_HOME="+filepath.Join(home, "home"),
		"VAGRANT_DOTFILE_PATH="+filepath.Join(home, "dot"),
		"VAGRANT_CHECKPOINT_DISABLE=1", // no version check over the network
		"VAGRANT_NO_COLOR=1",
	)
	if c.vboxStandIn {
		if _, err := exec.LookPath("VBoxManage"); err != nil {
			bin := filepath.Join(home, "bin")
			stub := "#!/bin/sh\n[ \"$1\" = --version ] && echo 7.0.20r163906 && exit 0\necho \"flock's stand-in: VBoxManage $*\" >&2\nexit 1\n"
			if err := os.MkdirAll(bin, 0o755); err != nil {
				return nil, nil, err
			}
			if err := os.WriteFile(filepath.Join(bin, "VBoxManage"), []byte(stub), 0o755); err != nil {
				return nil, nil, err
			}
			env = append(env, "PATH="+bin+":"+os.Getenv("PATH"))
		}
	}
	run := func(extraEnv []string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, c.vagrant, append([]string{"validate"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(slices.Clone(env), extraEnv...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(nil, "--ignore-provider"); err != nil || !strings.Contains(out, "validated successfully") {
		return nil, nil, fmt.Errorf("vagrant validate --ignore-provider: %v\n%s", err, out)
	}
	checked = []string{baseConfig}
	unchecked = map[string]string{}
	for _, p := range vagrantProviders(vf) {
		out, err := run([]string{"VAGRANT_DEFAULT_PROVIDER=" + p})
		switch {
		case err == nil && strings.Contains(out, "validated successfully"):
			checked = append(checked, p)
		case strings.Contains(out, "could not be found") || strings.Contains(out, "isn't usable on this system"):
			unchecked[p] = strings.TrimSpace(out)
		default:
			return checked, unchecked, fmt.Errorf("vagrant validate with provider %s: %v\n%s", p, err, out)
		}
	}
	return checked, unchecked, nil
}

// vagrantProviders are the providers a Vagrantfile has a block for.
func vagrantProviders(vf []byte) []string {
	var ps []string
	for _, m := range regexp.MustCompile(`\.vm\.provider\s+"([a-z_]+)"`).FindAllSubmatch(vf, -1) {
		if p := string(m[1]); !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	return ps
}

// TestVagrantfileValidates checks the Vagrantfile with vagrant's own rules
// in each situation a machine may be in (no provider plugin, a provider
// plugin, a provider that is not usable), and that in each the check
// refuses a Vagrantfile broken in any part it says it checked.
//
// Tier: tools (vagrant and vagrant-libvirt, make deps; skipped without
// them, failed in CI).
func TestVagrantfileValidates(t *testing.T) {
	vagrant := harness.VagrantTier.Tool(t, "vagrant")
	base := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VAGRANT_") {
			base = append(base, kv)
		}
	}
	good, err := os.ReadFile(harness.InRepo(t, "Vagrantfile"))
	if err != nil {
		t.Fatal(err)
	}
	if ps := vagrantProviders(good); !slices.Equal(ps, []string{"virtualbox", "libvirt"}) {
		t.Fatalf("Vagrantfile's providers: %v, want virtualbox and libvirt (the situations below assume them)", ps)
	}
	// A mistake in each part, which vagrant refuses where it checks it.
	breaks := []struct{ part, old, new string }{
		{baseConfig, `ansible.playbook = "`, `ansible.playbok = "`},
		{"virtualbox", "vb.cpus = 2", "vb.cpuss = 2"},
		{"libvirt", "lv.memory = 2048", "lv.memoryy = 2048"},
	}
	situations := []struct {
		name          string
		check         vagrantCheck
		wantChecked   []string
		wantUnchecked []string
	}{
		{"no provider plugin", vagrantCheck{vagrant, append(slices.Clone(base), "VAGRANT_NO_PLUGINS=1"), true},
			[]string{baseConfig, "virtualbox"}, []string{"libvirt"}},
		{"a provider plugin", vagrantCheck{vagrant, base, true},
			[]string{baseConfig, "virtualbox", "libvirt"}, nil},
		{"an unusable provider", vagrantCheck{vagrant, base, false},
			[]string{baseConfig, "libvirt"}, []string{"virtualbox"}},
	}
	for _, s := range situations {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			checked, unchecked, err := s.check.validate(ctx, vagrantDir(t, good))
			if err != nil {
				t.Fatalf("the repository's Vagrantfile: %v", err)
			}
			if !slices.Equal(checked, s.wantChecked) || !slices.Equal(sortedKeys(unchecked), s.wantUnchecked) {
				t.Fatalf("checked %v, unchecked %v; want checked %v, unchecked %v", checked, unchecked, s.wantChecked, s.wantUnchecked)
			}
			var wg sync.WaitGroup
			for _, b := range breaks {
				bad := strings.Replace(string(good), b.old, b.new, 1)
				if bad == string(good) {
					t.Fatalf("Vagrantfile has no %q to break", b.old)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					checked, unchecked, err := s.check.validate(ctx, vagrantDir(t, []byte(bad)))
					switch {
					case slices.Contains(s.wantChecked, b.part) && err == nil:
						t.Errorf("%s broken (%s) passed: checked %v", b.part, b.new, checked)
					case slices.Contains(s.wantChecked, b.part):
						t.Logf("%s broken: refused: %v", b.part, strings.ReplaceAll(harness.TailLines(err.Error(), 2), "\n", " / "))
					case err != nil || unchecked[b.part] == "":
						t.Errorf("%s broken where it is not checked: err %v, unchecked %v; want it listed unchecked", b.part, err, sortedKeys(unchecked))
					}
				}()
			}
			wg.Wait()
		})
	}

	// vagrant validate checks the provisioner's settings, not that the
	// playbook is there, nor that the machine is in the group it plays on.
	m := regexp.MustCompile(`(?m)^\s*ansible\.playbook\s*=\s*"([^"]+)"`).FindSubmatch(good)
	if m == nil {
		t.Fatalf("Vagrantfile has no ansible.playbook")
	}
	if _, err := os.Stat(harness.InRepo(t, string(m[1]))); err != nil {
		t.Errorf("Vagrantfile's playbook: %v", err)
	}
	for _, want := range []string{
		`config.vm.box = "debian/bookworm64"`,
		`config.vm.define "flock-vm"`,
		`ansible.groups = { "flock" => ["flock-vm"] }`,
		`flock_install: "package"`,
		`flock_deb: Dir.glob(File.join(__dir__, "bin", "flock_*_amd64.deb"))`,
	} {
		if !strings.Contains(string(good), want) {
			t.Errorf("Vagrantfile lacks %s", want)
		}
	}
}

// vagrantDir is a directory with vf as its Vagrantfile beside the
// repository's ansible/, which the Vagrantfile names.
func vagrantDir(t *testing.T, vf []byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Vagrantfile"), vf, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(harness.InRepo(t, "ansible"), filepath.Join(dir, "ansible")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	if len(ks) == 0 {
		return nil
	}
	return ks
}
