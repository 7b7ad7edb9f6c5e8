package harness

// sshd in a machine (Options.AuthorizedKeys), for Ansible and ssh from
// the controller of a private network (net.go). It is the host's
// openssh-server (the machine is an overlay of the host's /), which the
// host itself never runs (make deps-sshd), with a configuration, a host
// key and a unit of the harness's own: nothing of the host's sshd_config,
// keys or ssh.service (masked in every machine) is used.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

const (
	sshdBin = "/usr/sbin/sshd"
	// sshdDir holds the machine's sshd_config, host key and root's
	// authorized keys. The host key is made at the first boot and kept
	// on the machine's disk, so a machine powered off and on again is
	// the same host to ssh.
	sshdDir = "/etc/ssh/flock-harness"
	// SSHHostKeyFile is the machine's public host key (ed25519).
	SSHHostKeyFile = sshdDir + "/ssh_host_ed25519_key.pub"
	sshdUnit       = "flock-harness-sshd.service"
)

const sshdConfig = `# The flock test harness's sshd: root with a key the test made, nothing else.
Port 22
HostKey ` + sshdDir + `/ssh_host_ed25519_key
AuthorizedKeysFile ` + sshdDir + `/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PidFile /run/flock-harness-sshd.pid
Subsystem sftp /usr/lib/openssh/sftp-server
`

// The unit makes the host key when there is none; Debian's sshd notifies
// systemd when it listens, so the boot (is-system-running) waits for it.
const sshdUnitText = `[Unit]
Description=sshd of the flock test harness
After=network.target

[Service]
Type=notify
RuntimeDirectory=sshd
RuntimeDirectoryMode=0755
ExecStartPre=/bin/sh -c 'test -e ` + sshdDir + `/ssh_host_ed25519_key || exec ssh-keygen -q -t ed25519 -N "" -C %H -f ` + sshdDir + `/ssh_host_ed25519_key'
ExecStartPre=` + sshdBin + ` -t -f ` + sshdDir + `/sshd_config
ExecStart=` + sshdBin + ` -D -f ` + sshdDir + `/sshd_config
Restart=on-failure

[Install]
WantedBy=multi-user.target
`

// installSSHD puts the harness's sshd into the machine's root before it
// boots, enabled, with keys as root's authorized keys.
func installSSHD(root, keys string) error {
	if _, err := os.Stat(sshdBin); err != nil {
		return fmt.Errorf("a machine with sshd needs the host's openssh-server (make deps-sshd installs it without ever starting it on this host): %w", err)
	}
	dir := filepath.Join(root, sshdDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	if err := replaceFile(filepath.Join(dir, "sshd_config"), []byte(sshdConfig), 0o600); err != nil {
		return err
	}
	if err := replaceFile(filepath.Join(dir, "authorized_keys"), []byte(strings.TrimSpace(keys)+"\n"), 0o600); err != nil {
		return err
	}
	units := filepath.Join(root, "etc/systemd/system")
	if err := replaceFile(filepath.Join(units, sshdUnit), []byte(sshdUnitText), 0o644); err != nil {
		return err
	}
	wants := filepath.Join(units, "multi-user.target.wants")
	if err := os.MkdirAll(wants, 0o755); err != nil {
		return err
	}
	link := filepath.Join(wants, sshdUnit)
	if err := os.Remove(link); err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.Symlink("/etc/systemd/system/"+sshdUnit, link)
}

// sshdUp checks the machine's sshd is active (a failed unit leaves the
// machine degraded, which a boot accepts) and returns its host key line.
func (m *Machine) sshdUp(ctx context.Context) (string, error) {
	out, _, err := m.Run(ctx, "systemctl", "is-active", sshdUnit)
	if st := strings.TrimSpace(out); st != "active" {
		status, _, _ := m.Run(ctx, "systemctl", "status", "--no-pager", "-n", "20", sshdUnit)
		return "", fmt.Errorf("machine %s: %s is %q (%v):\n%s", m.name, sshdUnit, st, err, status)
	}
	key, err := m.ReadFile(SSHHostKeyFile)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(key)), nil
}

// SSHKey is a key pair a test made for root's logins into its machines.
type SSHKey struct {
	File   string // the private key, 0600
	Public string // its authorized_keys line
}

// NewSSHKey makes an ed25519 key pair without a passphrase in dir
// (ssh-keygen).
func NewSSHKey(dir string) (SSHKey, error) {
	f := filepath.Join(dir, "id_ed25519")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "flock-test", "-f", f).CombinedOutput(); err != nil {
		return SSHKey{}, fmt.Errorf("ssh-keygen -t ed25519 -f %s: %w: %s (apt-get install openssh-client)", f, err, strings.TrimSpace(string(out)))
	}
	pub, err := os.ReadFile(f + ".pub")
	if err != nil {
		return SSHKey{}, err
	}
	return SSHKey{File: f, Public: strings.TrimSpace(string(pub))}, nil
}

// sshOptions are the options of every ssh from the controller: no user or
// system config, only the test's key, the pinned host keys, bounded waits.
func sshOptions(key, knownHosts string) []string {
	return []string{
		"-F", "/dev/null", "-T",
		"-i", key, "-l", "root",
		"-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
		"-o", "UserKnownHostsFile=" + knownHosts, "-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "StrictHostKeyChecking=yes", "-o", "HostKeyAlgorithms=ssh-ed25519",
		"-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR",
	}
}

var errNoHost = errors.New("no such host")
