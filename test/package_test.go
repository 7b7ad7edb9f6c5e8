package test

// A release (make release) on a fresh Debian 12 (tier: root + VM).

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/internal/version"
	"github.com/flockrun/flock/test/harness"
)

// TestVMPackage builds a release as a tag does (make release, amd64),
// installs its package on a fresh qemu VM of Debian 12 with the commands
// of docs/install.md (sha256sum --check of SHA256SUMS, apt-get install of
// the .deb; the image has Debian's systemd, dbus, passwd and nftables,
// and no network: apt installs it only if its Depends are met by them),
// provisions the example it ships, and takes everything away again:
// deprovision --all --purge, then dpkg --purge, after which the VM is as
// it was before the install. Then the release's tarball, unpacked into
// /usr/local as install.md says, provisions a worker of its own.
//
// Tier: root + VM (qemu, harness.BootVMWith).
func TestVMPackage(t *testing.T) {
	// Not parallel, so it runs first in the VM tier: run last (about
	// 21 minutes in, beside the system tier's Claude Code and Node
	// tests), its VM twice stopped answering ssh during provision in CI,
	// and never alone; the cause is not found yet.
	if testing.Short() {
		t.Skip("boots a qemu VM: not with -short")
	}
	rel := harness.Release(t)
	debs, _ := filepath.Glob(filepath.Join(rel, "flock_*_amd64.deb"))
	if len(debs) != 1 {
		t.Fatalf("make release wrote %q, want one flock_*_amd64.deb", debs)
	}
	deb := debs[0]
	debVersion, err := harness.DebField(deb, "Version")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(deb); err == nil {
		t.Logf("%s: %d KiB", filepath.Base(deb), fi.Size()/1024)
	}
	v := harness.BootVMWith(t, harness.VMOptions{NoBinaries: true})
	before := vmFootprint(t, v)

	// What an operator downloads: the package and SHA256SUMS, into a
	// directory of their own (install.md), so --ignore-missing skips the
	// tarball and the SBOM that were not downloaded.
	dl := "/root/download"
	upload(t, v, dl, deb, filepath.Join(rel, "SHA256SUMS"))
	if out := mustRun(t, v, "sh", "-c", "cd "+dl+" && sha256sum --check --ignore-missing SHA256SUMS"); out != filepath.Base(deb)+": OK\n" {
		t.Errorf("sha256sum --check --ignore-missing SHA256SUMS: %q, want the package OK", out)
	}
	t0 := time.Now()
	mustRun(t, v, "sh", "-c", "cd "+dl+" && apt-get install -y -q ./"+filepath.Base(deb))
	t.Logf("apt-get install ./%s: %v", filepath.Base(deb), time.Since(t0).Round(time.Millisecond))
	mustRun(t, v, "rm", "-r", dl)

	t.Run("flockctl and flock-agent say the package's version", func(t *testing.T) {
		var in version.Info
		if err := json.Unmarshal([]byte(mustRun(t, v, "flockctl", "version", "--output", "json")), &in); err != nil {
			t.Fatal(err)
		}
		if in.Program != "flockctl" || in.Version != debVersion || len(in.Commit) < 40 || in.Date == "unknown" {
			t.Errorf("flockctl version: %+v, want version %s with its commit and date", in, debVersion)
		}
		if out := mustRun(t, v, "flock-agent", "--version"); !strings.HasPrefix(out, "flock-agent "+debVersion+" (commit "+in.Commit+",") {
			t.Errorf("flock-agent --version: %q, want version %s, commit %s", out, debVersion, in.Commit)
		}
		if out := mustRun(t, v, "sh", "-c", "command -v flockctl && command -v flock-agent"); out != "/usr/bin/flockctl\n/usr/bin/flock-agent\n" {
			t.Errorf("on PATH: %q, want both in /usr/bin", out)
		}
	})

	t.Run("completions and man pages", func(t *testing.T) {
		// bash-completion is not installed: source the file by hand, as
		// its loader would, and ask bash what completes flockctl.
		if out := mustRun(t, v, "bash", "-c", ". /usr/share/bash-completion/completions/flockctl && complete -p flockctl"); !strings.Contains(out, "flockctl") {
			t.Errorf("bash completion: %q", out)
		}
		if out := mustRun(t, v, "head", "-1", "/usr/share/zsh/vendor-completions/_flockctl"); !strings.HasPrefix(out, "#compdef flockctl") {
			t.Errorf("zsh completion starts %q", out)
		}
		for page, title := range map[string]string{"flockctl": "FLOCKCTL", "flockctl-provision": "FLOCKCTL", "flockctl-deprovision": "FLOCKCTL",
			"flockctl-version": "FLOCKCTL", "flock-agent": "FLOCK-AGENT"} {
			out := mustRun(t, v, "sh", "-c", "gzip -dc /usr/share/man/man1/"+page+".1.gz")
			if !strings.Contains(out, `.TH "`+title+`" "1"`) || !strings.Contains(out, ".SH SYNOPSIS") {
				t.Errorf("man page %s:\n%s", page, out)
			}
		}
		if out := mustRun(t, v, "ls", "/usr/share/doc/flock"); out != "README.md\nchangelog.gz\ncopyright\ndocs\nexamples\nlicenses\nmonitoring\n" {
			t.Errorf("/usr/share/doc/flock holds %q", out)
		}
	})

	t.Run("the example provisions from the package's programs", func(t *testing.T) {
		mustRun(t, v, "flockctl", "provision", "-f", "/usr/share/doc/flock/examples/flock.yaml")
		vmWaitActive(t, v, 2*time.Minute, 1, 2, 3)
		if p := vmProps(t, v, "flock.service", "ExecStart"); !strings.Contains(p["ExecStart"], "path=/usr/bin/flockctl ") {
			t.Errorf("flock.service runs %s, want /usr/bin/flockctl", p["ExecStart"])
		}
		for _, id := range []int{1, 2, 3} {
			if p := vmProps(t, v, unitName(id), "ExecStart"); !strings.Contains(p["ExecStart"], "path=/usr/bin/flock-agent ") {
				t.Errorf("%s runs %s, want /usr/bin/flock-agent", unitName(id), p["ExecStart"])
			}
		}
		// A task through the bus to the worker (tr a-z A-Z).
		if out := mustRun(t, v, "flockctl", "send", "--timeout", "2m", "from the package"); strings.TrimSpace(out) != "FROM THE PACKAGE" {
			t.Errorf("flockctl send: %q, want the worker's FROM THE PACKAGE", out)
		}
	})

	t.Run("the package is not removed under a provisioned flock", func(t *testing.T) {
		_, errOut, err := run(t, v, "dpkg", "--purge", "flock")
		if err == nil || !strings.Contains(errOut, "run 'flockctl deprovision --all --purge' first") {
			t.Errorf("dpkg --purge with a flock provisioned: %v\n%s; want the prerm's refusal", err, errOut)
		}
		if out := mustRun(t, v, "dpkg-query", "-W", "-f", "${db:Status-Status}", "flock"); out != "installed" {
			t.Errorf("after the refused purge the package is %q, want installed", out)
		}
		vmWaitActive(t, v, time.Minute, 1, 2, 3)
	})

	t.Run("the next package over a running flock loses no task and restarts each agent once", func(t *testing.T) {
		upgradeUnderLoad(t, v, deb)
	})

	t.Run("deprovision and purge leave nothing", func(t *testing.T) {
		mustRun(t, v, "flockctl", "deprovision", "--yes", "--all", "--purge")
		mustRun(t, v, "dpkg", "--purge", "flock")
		if out, _, err := run(t, v, "dpkg-query", "-W", "flock"); err == nil {
			t.Errorf("dpkg still knows flock: %s", out)
		}
		for _, p := range []string{"/usr/bin/flockctl", "/usr/bin/flock-agent", "/usr/share/doc/flock", "/etc/flock", "/var/lib/flock",
			"/srv/flock", "/var/lib/private/flock-bus", "/etc/systemd/system/flock.service", "/etc/sysusers.d/flock.conf"} {
			if out, _, err := run(t, v, "ls", "-d", p); err == nil {
				t.Errorf("left behind: %s", out)
			}
		}
		if out, _, _ := run(t, v, "sh", "-c", "getent passwd | grep '^flock'; getent group | grep '^flock'"); out != "" {
			t.Errorf("users or groups left behind:\n%s", out)
		}
		if out := mustRun(t, v, "systemctl", "list-units", "--all", "--no-legend", "flock*"); strings.TrimSpace(out) != "" {
			t.Errorf("units left behind:\n%s", out)
		}
		if out, _, err := run(t, v, "nft", "list", "table", "inet", "flock"); err == nil {
			t.Errorf("table inet flock left behind:\n%s", out)
		}
		after := vmFootprint(t, v)
		for k := range before {
			if gone, added := lineDiff(before[k], after[k]); len(gone)+len(added) > 0 {
				t.Errorf("%s differ from before the install:\nnow missing:\n%s\nnew:\n%s", k, strings.Join(gone, "\n"), strings.Join(added, "\n"))
			}
		}
	})

	t.Run("the release's tarball installs into /usr/local and runs a worker", func(t *testing.T) {
		tgzs, _ := filepath.Glob(filepath.Join(rel, "flock_*_linux_amd64.tar.gz"))
		if len(tgzs) != 1 {
			t.Fatalf("make release wrote %q, want one flock_*_linux_amd64.tar.gz", tgzs)
		}
		tgz := filepath.Base(tgzs[0])
		upload(t, v, dl, tgzs[0], filepath.Join(rel, "SHA256SUMS"))
		if out := mustRun(t, v, "sh", "-c", "cd "+dl+" && sha256sum --check --ignore-missing SHA256SUMS"); out != tgz+": OK\n" {
			t.Errorf("sha256sum --check --ignore-missing SHA256SUMS: %q, want the tarball OK", out)
		}
		mustRun(t, v, "tar", "-xzf", dl+"/"+tgz, "-C", "/usr/local", "--strip-components=1", "--no-overwrite-dir")
		if out := mustRun(t, v, "sh", "-c", "command -v flockctl && command -v flock-agent"); out != "/usr/local/bin/flockctl\n/usr/local/bin/flock-agent\n" {
			t.Errorf("on PATH: %q, want both in /usr/local/bin", out)
		}
		if out := mustRun(t, v, "flockctl", "--version"); !strings.HasPrefix(out, "flockctl "+debVersion+" ") {
			t.Errorf("flockctl --version: %q, want version %s", out, debVersion)
		}
		for _, f := range []string{"share/man/man1/flockctl.1.gz", "share/man/man1/flock-agent.1.gz",
			"share/bash-completion/completions/flockctl", "share/zsh/site-functions/_flockctl", "share/doc/flock/LICENSE"} {
			mustRun(t, v, "test", "-s", "/usr/local/"+f)
		}
		vmProvision(t, v, "agents:\n  - {id: 1, role: orchestrator}\n  - {id: 2, role: worker, command: [/usr/bin/tr, a-z, A-Z]}\n")
		vmWaitActive(t, v, 2*time.Minute, 1, 2)
		if p := vmProps(t, v, unitName(2), "ExecStart"); !strings.Contains(p["ExecStart"], "path=/usr/local/bin/flock-agent ") {
			t.Errorf("%s runs %s, want /usr/local/bin/flock-agent", unitName(2), p["ExecStart"])
		}
		if out := mustRun(t, v, "flockctl", "send", "--timeout", "2m", "from the tarball"); strings.TrimSpace(out) != "FROM THE TARBALL" {
			t.Errorf("flockctl send: %q, want the worker's FROM THE TARBALL", out)
		}
		mustRun(t, v, "flockctl", "deprovision", "--yes", "--all", "--purge")
		// install.md: tar -tzf lists what it put where, to remove it.
		mustRun(t, v, "sh", "-c", "cd /usr/local && tar -tzf "+dl+"/"+tgz+" | cut -d/ -f2- | grep -v '/$' | xargs rm --")
		if out, _, err := run(t, v, "ls", "/usr/local/bin"); err != nil || out != "" {
			t.Errorf("/usr/local/bin after removing the tarball's files: %q (%v)", out, err)
		}
	})
}

// upload copies files of this machine into dir on the VM, by their names.
func upload(t testing.TB, v *harness.VM, dir string, files ...string) {
	t.Helper()
	mustRun(t, v, "mkdir", "-p", dir)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.WriteFile(dir+"/"+filepath.Base(f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// vmFootprint is what a package and a flock could leave on the VM: every
// path on its root file system with type, mode and owner, and the content
// of every file in /etc. Left out: what changes on its own (the journal and
// logs, caches, /tmp, /run), dpkg's, apt's and systemd's own records, root's home
// (the harness's ssh), and the content of shadow's backups (/etc/passwd-
// and the like: userdel and groupdel leave there the file as it was before
// their last change; /etc/passwd itself is compared).
func vmFootprint(t testing.TB, v *harness.VM) map[string]string {
	t.Helper()
	const script = `find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /tmp -o -path /var/tmp \
	-o -path /var/log -o -path /var/cache -o -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/lib/systemd -o -path /root \) -prune \
	-o -printf '%y %m %u:%g %p\n' | LC_ALL=C sort`
	return map[string]string{
		"paths": mustRun(t, v, "sh", "-c", script),
		"/etc":  mustRun(t, v, "sh", "-c", "find /etc -xdev -type f ! -name passwd- ! -name group- ! -name shadow- ! -name gshadow- -print0 | LC_ALL=C sort -z | xargs -0 sha256sum"),
	}
}

// lineDiff is the lines of a not in b, and of b not in a.
func lineDiff(a, b string) (onlyA, onlyB []string) {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	for l := range ma {
		if !mb[l] {
			onlyA = append(onlyA, l)
		}
	}
	for l := range mb {
		if !ma[l] {
			onlyB = append(onlyB, l)
		}
	}
	sort.Strings(onlyA)
	sort.Strings(onlyB)
	return onlyA, onlyB
}
