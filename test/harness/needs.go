package harness

// What each tier of the system tests needs from the host, in one place:
// the tests require their tier's needs, and TestPreflight checks them all
// at once. make deps installs or builds every one of them.

import (
	"os"
	"os/exec"
	"testing"

	"github.com/flockrun/flock/internal/tier"
)

// Tier is a named set of needs.
type Tier struct {
	Name  string
	Needs []tier.Need
}

// Require skips t (fails it in CI) naming everything of the tier the
// machine lacks.
func (tr Tier) Require(t testing.TB) {
	t.Helper()
	tier.RequireNeeds(t, tr.Name, tr.Needs...)
}

// Tool requires the tier (Require) and returns the path of name, one of
// its programs.
func (tr Tier) Tool(t testing.TB, name string) string {
	t.Helper()
	tr.Require(t)
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("tier %s: %v", tr.Name, err)
	}
	return p
}

// Missing is nil when the machine has everything the tier needs.
func (tr Tier) Missing() error { return tier.Missing(tr.Needs...) }

var goNeed = tier.Built("go", "Go 1.26 on PATH or at /usr/local/go/bin, as the README says")

// NspawnTier is a booted systemd machine: an overlay of the host's /, so
// what runs inside (systemd, D-Bus, nft, the tests' tools, the busybox of
// the levels' rootfs) is the host's.
var NspawnTier = Tier{Name: "system (nspawn)", Needs: []tier.Need{
	tier.Root("systemd-nspawn boots machines and mounts overlays"),
	goNeed,
	tier.Program("systemd-nspawn", "systemd-container"),
	tier.Program("nsenter", "util-linux"),
	tier.File("/lib/systemd/systemd", 1, "systemd"),
	tier.Program("systemd-sysusers", "systemd"),
	tier.Program("dbus-daemon", "dbus"),
	tier.Program("nft", "nftables"),
	tier.Program("ss", "iproute2"),
	tier.Program("ps", "procps"),
	tier.Program("userdel", "passwd"),
	tier.File(busybox, 1<<20, "busybox-static"),
}}

// BusTier adds clients an agent brings: the nats CLI, and curl (through
// the egress proxy).
var BusTier = Tier{Name: "system, bus (nats CLI, curl)", Needs: []tier.Need{
	tier.Built("nats", "make deps: go install github.com/nats-io/natscli/nats"),
	tier.Program("curl", "curl"),
}}

// MetricsTier is Debian's prometheus package: the server the metrics test
// runs in the machine, and promtool, which lints the exposition.
var MetricsTier = Tier{Name: "system, metrics (prometheus, promtool, curl)", Needs: []tier.Need{
	tier.Program("prometheus", "prometheus"),
	tier.Program("promtool", "prometheus"),
	tier.Program("curl", "curl"),
}}

// LevelsTier adds the container runtimes.
var LevelsTier = Tier{Name: "system, levels (podman, runsc)", Needs: []tier.Need{
	tier.Program("podman", "podman"),
	tier.Program("crun", "crun"),
	tier.Built("runsc", "make runsc (make deps does): a static build through the Go module proxy"),
}}

// RuntimesTier is the language runtimes agents bring: Node with npm (the
// example's nats client comes from the npm registry), a JDK (a JVM whose
// launcher runs a source file), CPython.
var RuntimesTier = Tier{Name: "system, real agents (node, npm, a JDK, python3)", Needs: []tier.Need{
	tier.Program("node", "nodejs"),
	tier.Program("npm", "npm"),
	tier.Program("python3", "python3"),
	tier.Prints("a JDK's java, which runs a .java source file", "apt-get install openjdk-17-jdk-headless; make deps does",
		"jdk.compiler", "java", "--list-modules"),
}}

// SecretsTier is the clients whose secrets flock-proxy swaps, run from
// inside an agent: git (and its http-backend, the stand-in's server),
// gh, curl, CPython's requests, and Node with npm (undici's fetch, from
// the npm registry).
var SecretsTier = Tier{Name: "system, secrets (git, gh, curl, python3-requests, node, npm)", Needs: []tier.Need{
	tier.Program("git", "git"),
	tier.Program("gh", "gh"),
	tier.Program("curl", "curl"),
	tier.Prints("CPython's requests (/usr/bin/python3, as the agents run it)", "apt-get install python3-requests; make deps does",
		"requests ok", "/usr/bin/python3", "-c", "import requests; print('requests ok')"),
	tier.Program("node", "nodejs"),
	tier.Program("npm", "npm"),
}}

// HostsTier is several machines on a private network with sshd
// (BootHosts): ip for the namespaces, bridge and veths, the host's sshd
// for the machines (never run on the host itself: make deps-sshd), and
// ssh for the controller.
var HostsTier = Tier{Name: "system, hosts (a private network, sshd)", Needs: []tier.Need{
	tier.Program("ip", "iproute2"),
	tier.Check(sshdBin, "make deps-sshd (make deps does): openssh-server, installed so that this host never runs it",
		func() error { _, err := os.Stat(sshdBin); return err }),
	tier.Program("ssh", "openssh-client"),
	tier.Program("ssh-keygen", "openssh-client"),
}}

// ClusterTier is what the test of a flock on several hosts adds to
// HostsTier: Ansible on the controller; in the machines curl for the
// bus's monitoring endpoint (JetStream's cluster state) and openssl to
// check the certificates.
var ClusterTier = Tier{Name: "system, cluster (ansible-core, curl)", Needs: []tier.Need{
	tier.Program("ansible-playbook", "ansible-core"),
	tier.Program("curl", "curl"),
	tier.Program("openssl", "openssl"),
}}

// AnsibleTier is ansible-core and ansible-lint, as Debian packages them.
var AnsibleTier = Tier{Name: "tools, ansible", Needs: []tier.Need{
	tier.Program("ansible", "ansible-core"),
	tier.Program("ansible-playbook", "ansible-core"),
	tier.Program("ansible-inventory", "ansible-core"),
	tier.Program("ansible-lint", "ansible-lint"),
}}

// VagrantTier is vagrant and the provider plugin whose block of the
// Vagrantfile it checks (VirtualBox's is vagrant's own).
var VagrantTier = Tier{Name: "tools, vagrant", Needs: []tier.Need{
	tier.Program("vagrant", "vagrant"),
	tier.Prints("vagrant's libvirt provider plugin", "apt-get install vagrant-libvirt; make deps does",
		"vagrant-libvirt", "vagrant", "plugin", "list"),
}}

// VMTier is a qemu VM and the image build.
var VMTier = Tier{Name: "VM (qemu)", Needs: vmNeeds()}

func vmNeeds() []tier.Need {
	needs := []tier.Need{tier.Root("the image build chroots and mounts"), goNeed}
	for _, x := range []struct{ tool, pkg string }{
		{"qemu-system-x86_64", "qemu-system-x86"},
		{"qemu-img", "qemu-utils"},
		{"debootstrap", "debootstrap"},
		{"mkfs.ext4", "e2fsprogs"},
		{"ssh", "openssh-client"},
		{"ssh-keygen", "openssh-client"},
		{"unshare", "util-linux"},
		// make deb builds the package the VM tests install.
		{"make", "make"},
		{"dpkg-deb", "dpkg"},
	} {
		needs = append(needs, tier.Program(x.tool, x.pkg))
	}
	return append(needs, mirrorNeed)
}

var mirrorNeed = tier.Check("a Debian mirror in the host's apt sources", "add one, or set FLOCK_VM_MIRROR",
	func() error { _, err := debianMirror(); return err })

// Tiers are every tier that needs more than Go, for the preflight.
var Tiers = []Tier{NspawnTier, HostsTier, ClusterTier, BusTier, MetricsTier, LevelsTier, RuntimesTier, SecretsTier, AnsibleTier, VagrantTier, VMTier, FreshTier, PackageTier}

// PackageTier builds the Debian package (make deb: Go, and nfpm and
// go-licenses through the Go module proxy) and checks it as Debian does
// (lintian) and its licenses (go-licenses, on fixtures too), and the
// release (make release: git says the commit's time).
var PackageTier = Tier{Name: "package (make deb, lintian)", Needs: []tier.Need{
	goNeed,
	tier.Program("make", "make"),
	tier.Program("git", "git"),
	tier.Program("dpkg-deb", "dpkg"),
	tier.Program("lintian", "lintian"),
}}

// FreshTier is a fresh machine (fresh.go): the tree is made by
// debootstrap, the repository copied by what git tracks.
var FreshTier = Tier{Name: "fresh machine (nspawn, debootstrap)", Needs: []tier.Need{
	tier.Root("debootstrap and systemd-nspawn need it"),
	goNeed,
	tier.Program("systemd-nspawn", "systemd-container"),
	tier.Program("debootstrap", "debootstrap"),
	tier.Program("unshare", "util-linux"),
	tier.Program("git", "git"),
	mirrorNeed,
}}
