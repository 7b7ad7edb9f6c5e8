package harness

// The VM's disk image, as a recipe: what debootstrap and apt put in it and
// the files written over it. The recipe's hash names the cached image, so
// changing anything here builds a new one and never reuses a stale one.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

const (
	vmSuite     = "bookworm"
	vmImageSize = "3G" // sparse; the tree is about 700 MB
	vmHostname  = "flock-vm"
	// recipeVersion changes the hash when the Go side of the build
	// changes in a way the strings below do not show.
	recipeVersion = "4"
)

// vmPackages are installed in the chroot, without recommends. flockctl
// needs systemd-sysusers (systemd), userdel/groupdel (passwd), D-Bus to
// reach systemd and the nf_tables module (kmod loads it on demand); the
// tests need ssh, python3 (their hogs, and Ansible), ps and ip, and
// python3-apt for the Ansible role's package path (ansible.builtin.apt
// deb=), which Ansible would install itself on a host with a network; the
// VM has none. busybox-static is the VM's initramfs (chrootScript), and
// the root file system of the tests' gVisor agent (runsc, which Debian
// does not package, the role copies from the controller).
var vmPackages = []string{
	"linux-image-cloud-amd64", "initramfs-tools", "systemd-sysv", "udev", "kmod", "dbus",
	"openssh-server", "nftables", "python3", "procps", "iproute2", "passwd", "netbase",
	"python3-apt", "busybox-static",
}

// vmMasked are units a test VM never wants: periodic maintenance, the
// first-boot prompt that would wait on the console, logins on the
// consoles and logind's sessions (the tests log in only over ssh, which
// uses no PAM), and kernel interfaces no test uses, each of which costs
// seconds of an emulated boot.
var vmMasked = []string{
	"apt-daily.timer", "apt-daily-upgrade.timer", "e2scrub_all.timer", "e2scrub_reap.service",
	"fstrim.timer", "dpkg-db-backup.timer", "systemd-firstboot.service",
	"getty@tty1.service", "serial-getty@ttyS0.service", "systemd-logind.service",
	"sys-kernel-debug.mount", "sys-kernel-tracing.mount", "dev-hugepages.mount",
	"sys-kernel-config.mount", "sys-fs-fuse-connections.mount",
	"systemd-binfmt.service", "proc-sys-fs-binfmt_misc.automount",
	"modprobe@drm.service", "modprobe@efi_pstore.service", "modprobe@dm_mod.service",
	"modprobe@fuse.service", "modprobe@configfs.service", "modprobe@loop.service",
	"kmod-static-nodes.service", "systemd-network-generator.service",
}

// chrootScript runs on the host in mount and PID namespaces of its own
// (vm_image.go), so the mounts it makes in the tree die with it even if it
// is killed: a stale build dir can then be removed without reaching
// through a bind of /dev. $1 tree, $2 mirror, $3 the apt settings taken
// from the host (hostApt), the rest are packages.
const chrootScript = `set -euo pipefail
tree=$1 mirror=$2 aptconf=$3; shift 3
debootstrap --variant=minbase ` + vmSuite + ` "$tree" "$mirror"
cp "$aptconf" "$tree/etc/apt/apt.conf.d/00flock-host"
# No service starts in the chroot: the host must not get an sshd.
printf '#!/bin/sh\nexit 101\n' > "$tree/usr/sbin/policy-rc.d"
chmod 755 "$tree/usr/sbin/policy-rc.d"
mount -t proc proc "$tree/proc"
mount -t sysfs sysfs "$tree/sys"
mount --rbind /dev "$tree/dev"
inroot() { chroot "$tree" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "$@"; }
inroot apt-get update -q
inroot apt-get install -y -q --no-install-recommends "$@"
# The VM's initramfs is its own, not Debian's: the disk's drivers (ext4
# is built in), the root file system mounted, systemd started, in under
# a second of an emulated guest (initramfs-tools' took 4.5 s).
kver=$(ls "$tree/lib/modules")
rd="$tree/tmp/flock-initrd"
mkdir -p "$rd/bin" "$rd/dev" "$rd/lib" "$rd/root"
cp "$tree/bin/busybox" "$rd/bin/busybox"
for m in virtio/virtio virtio/virtio_ring virtio/virtio_pci_legacy_dev virtio/virtio_pci_modern_dev virtio/virtio_pci block/virtio_blk; do
	cp "$tree/lib/modules/$kver/kernel/drivers/$m.ko" "$rd/lib/"
done
cat > "$rd/init" <<'INIT'
#!/bin/busybox sh
fail() { echo "flock-vm init: $*; powering off" >/dev/console; exec /bin/busybox poweroff -f; }
/bin/busybox mount -t devtmpfs devtmpfs /dev || fail "mount /dev"
for m in virtio virtio_ring virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_blk; do
	/bin/busybox insmod /lib/$m.ko || fail "insmod $m"
done
i=0
while [ ! -b /dev/vda ]; do
	i=$((i + 1)); [ $i -le 1000 ] || fail "no /dev/vda"
	/bin/busybox usleep 10000
done
/bin/busybox mount -t ext4 -o rw /dev/vda /root || fail "mount /dev/vda"
/bin/busybox mount --move /dev /root/dev || fail "move /dev"
exec /bin/busybox switch_root /root /sbin/init
INIT
chmod 755 "$rd/init"
inroot sh -c 'cd /tmp/flock-initrd && find . | cpio -o -H newc --quiet > /boot/flock-initrd.img'
rm -rf "$rd"
inroot apt-get clean
# dbus made a machine id; systemd would copy it into every VM.
rm -rf "$tree"/var/lib/apt/lists/* "$tree/usr/sbin/policy-rc.d" "$tree/var/lib/dbus/machine-id" "$tree/etc/apt/apt.conf.d/00flock-host"
`

// vmFiles are written into the tree after the packages, path -> content.
// authorized_keys is added at build time (the key is made per cache).
var vmFiles = map[string]string{
	"/etc/fstab":    "/dev/vda / ext4 rw,errors=remount-ro 0 0\n",
	"/etc/hostname": vmHostname + "\n",
	"/etc/hosts":    "127.0.0.1 localhost\n127.0.1.1 " + vmHostname + "\n::1 localhost ip6-localhost ip6-loopback\n",
	// Empty: each VM's systemd makes its own id on its first boot (the
	// overlay is fresh every time), so journals never clash.
	"/etc/machine-id": "",
	// Nothing resolves: the VM reaches nothing outside anyway.
	"/etc/resolv.conf": "",
	// QEMU's user network's one address, set by ip(8): systemd-networkd
	// asking QEMU's DHCP for it cost an emulated boot two seconds. The
	// interface is eth0 (net.ifnames=0, vm_qemu.go).
	"/etc/systemd/system/vm-net.service": `[Unit]
Description=The address on QEMU's user network
DefaultDependencies=no
BindsTo=sys-subsystem-net-devices-eth0.device
After=sys-subsystem-net-devices-eth0.device
Wants=network.target
Before=network.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/sbin/ip link set eth0 up
ExecStart=/usr/sbin/ip addr add 10.0.2.15/24 dev eth0
ExecStart=/usr/sbin/ip route add default via 10.0.2.2
`,
	"/etc/systemd/system/multi-user.target.d/flock-vm.conf": "[Unit]\nWants=vm-net.service\n",
	// MaxSessions: the harness runs every command as a session of one
	// shared connection; 10, the default, would cap concurrent commands.
	// No PAM: a login through it would start logind's session and root's
	// own systemd, seconds of an emulated guest for every new connection.
	"/etc/ssh/sshd_config.d/flock-vm.conf": "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUseDNS no\nMaxSessions 100\nUsePAM no\n",
}

// recipeHash names the image: everything above, in a stable order.
func recipeHash() string {
	var b strings.Builder
	fmt.Fprintf(&b, "version %s\nsuite %s\nsize %s\npackages %s\nmasked %s\nscript\n%s\n",
		recipeVersion, vmSuite, vmImageSize, strings.Join(vmPackages, " "), strings.Join(vmMasked, " "), chrootScript)
	paths := make([]string, 0, len(vmFiles))
	for p := range vmFiles {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(&b, "file %s %q\n", p, vmFiles[p])
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}
