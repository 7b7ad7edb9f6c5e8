package harness

// Commands and files in a VM, over ssh as root (OpenSSH's client: no ssh
// library in the module). One master connection is shared by all commands
// (ControlMaster): a new ssh handshake costs the emulated guest a lot.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

func (v *VM) knownHosts() string  { return filepath.Join(v.dir, "known_hosts") }
func (v *VM) controlPath() string { return filepath.Join(v.dir, "ssh.ctl") }

// knownHostsLine pins the image's host key at this VM's port, so ssh
// checks the host strictly and asks nothing.
func (v *VM) knownHostsLine() []byte {
	key, err := os.ReadFile(v.img.HostKey)
	if err != nil {
		return nil // ssh then refuses the host, and says so
	}
	f := strings.Fields(string(key))
	if len(f) < 2 {
		return nil
	}
	return []byte(fmt.Sprintf("[127.0.0.1]:%d %s %s\n", v.port, f[0], f[1]))
}

// sshArgs are the options of every ssh to the VM: no user or system
// config, only the image's key, the pinned host key, and bounded waits.
func (v *VM) sshArgs(master string) []string {
	return []string{
		"-F", "/dev/null", "-T",
		"-i", v.img.Key, "-p", strconv.Itoa(v.port), "-l", "root",
		"-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
		"-o", "UserKnownHostsFile=" + v.knownHosts(), "-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "StrictHostKeyChecking=yes", "-o", "HostKeyAlgorithms=ssh-ed25519",
		"-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=6",
		"-o", "LogLevel=ERROR",
		"-o", "ControlPath=" + v.controlPath(), "-o", "ControlMaster=" + master,
	}
}

// sshMaster is the shared connection: an ssh process we started and end.
type sshMaster struct {
	*tied
	socket string
}

// startMaster opens the shared connection. Without it every command
// connects on its own (ssh falls back when the socket is missing or
// dead), only slower, so a failure here is logged, not returned.
func (v *VM) startMaster() {
	// A socket left by a killed master would make the new one give up
	// multiplexing, and every client complain on stderr.
	_ = os.Remove(v.controlPath())
	argv := append(v.sshArgs("yes"), "-N", "-o", "ControlPersist=no", "127.0.0.1")
	t, err := startTied(exec.Command("ssh", argv...), "")
	if err != nil {
		v.logf("vm %s: ssh master: %v; every command connects on its own", v.name, err)
		return
	}
	m := &sshMaster{tied: t, socket: v.controlPath()}
	// ssh links the socket into place once it listens.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.poll(ctx, 50*time.Millisecond, func(context.Context) (bool, error) {
		_, err := os.Stat(m.socket)
		return err == nil, err
	}); err != nil {
		v.logf("vm %s: ssh master not up: %v; every command connects on its own", v.name, err)
		m.stop()
		return
	}
	v.mu.Lock()
	v.master = m
	v.mu.Unlock()
}

// stop ends the master. It is only a client connection: SIGKILL loses
// nothing (SIGTERM was seen to take 5 s), and the guest's sshd ends the
// session when the connection closes.
func (m *sshMaster) stop() {
	if m == nil {
		return
	}
	_ = m.kill()
	_ = os.Remove(m.socket)
}

// Run runs argv in the VM as root with a clean environment (runEnv) and
// empty stdin; each argument reaches the command as given, whatever it
// holds. ctx bounds it: when ctx ends ssh is killed (the command in the
// VM may outlive it). err is a *RunError when the command fails; exit
// status 255 is also ssh's own failure.
func (v *VM) Run(ctx context.Context, argv ...string) (stdout, stderr string, err error) {
	out, errOut, err := v.runIn(ctx, nil, argv...)
	return string(out), errOut, err
}

// runIn is Run with stdin, and stdout as bytes.
func (v *VM) runIn(ctx context.Context, stdin io.Reader, argv ...string) ([]byte, string, error) {
	q := v.qemu()
	if q == nil {
		return nil, "", &RunError{Machine: v.name, Argv: argv, ExitCode: -1, Err: errors.New("VM not running")}
	}
	if gone, err := q.exited(); gone {
		return nil, "", &RunError{Machine: v.name, Argv: argv, ExitCode: -1, Err: err}
	}
	return v.run(ctx, stdin, argv...)
}

func (v *VM) run(ctx context.Context, stdin io.Reader, argv ...string) ([]byte, string, error) {
	return v.runSSH(ctx, nil, stdin, argv...)
}

// runSSH is run with ssh options that take precedence over sshArgs (ssh
// keeps the first value it is given for an option).
func (v *VM) runSSH(ctx context.Context, opts []string, stdin io.Reader, argv ...string) ([]byte, string, error) {
	if len(argv) == 0 {
		return nil, "", &RunError{Machine: v.name, ExitCode: -1, Err: errors.New("empty argv")}
	}
	remote := "exec env -i " + shellJoin(runEnv) + " " + shellJoin(argv)
	args := append(append(opts, v.sshArgs("no")...), "127.0.0.1", remote)
	cmd := exec.CommandContext(ctx, "ssh", args...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errOut
	// A daemon started by the command may hold the channel open after
	// the command is done; stop waiting for it past this.
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	err = runError(ctx, v.name, argv, err, errOut.String())
	return out.Bytes(), errOut.String(), err
}

// Stream runs argv in the VM as Run does, but hands each line of its
// stdout to lines as it comes. lines is closed when the command's stdout
// ends: it exited, ctx ended (ssh is killed), or the VM's power was cut.
// wait then says how it ended, with its stderr.
func (v *VM) Stream(ctx context.Context, argv ...string) (lines <-chan string, wait func() error, err error) {
	if v.qemu() == nil {
		return nil, nil, &RunError{Machine: v.name, Argv: argv, ExitCode: -1, Err: errors.New("VM not running")}
	}
	remote := "exec env -i " + shellJoin(runEnv) + " " + shellJoin(argv)
	cmd := exec.CommandContext(ctx, "ssh", append(v.sshArgs("no"), "127.0.0.1", remote)...)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, &RunError{Machine: v.name, Argv: argv, ExitCode: -1, Err: err}
	}
	ch := make(chan string, 4096)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(ch)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch, func() error {
		<-done
		return runError(ctx, v.name, argv, cmd.Wait(), errOut.String())
	}, nil
}

// shellSafe needs no quoting in a POSIX shell.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellJoin quotes each word for the remote user's shell, which is what
// ssh hands its one command string to.
func shellJoin(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		if shellSafe.MatchString(w) {
			q[i] = w
		} else {
			q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

// vmFileTimeout bounds ReadFile and WriteFile.
const vmFileTimeout = 2 * time.Minute

// noSuchFile is the exit status ReadFile's command uses for a missing file.
const noSuchFile = 44

// ReadFile reads path in the VM as root. A missing file is an error
// matching fs.ErrNotExist.
func (v *VM) ReadFile(p string) ([]byte, error) {
	if !path.IsAbs(p) {
		return nil, fmt.Errorf("vm %s: %q: want an absolute path inside the VM", v.name, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), vmFileTimeout)
	defer cancel()
	out, _, err := v.runIn(ctx, nil, "sh", "-c", `test -e "$1" || exit `+strconv.Itoa(noSuchFile)+`; exec cat -- "$1"`, "sh", p)
	var re *RunError
	if errors.As(err, &re) && re.ExitCode == noSuchFile {
		return nil, fmt.Errorf("vm %s: %w", v.name, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist})
	}
	if err != nil {
		return nil, fmt.Errorf("vm %s: read %s: %w", v.name, p, err)
	}
	return out, nil
}

// WriteFile writes path in the VM as root, creating or truncating it,
// and leaves it with exactly mode's permission bits. Its directory must
// exist.
func (v *VM) WriteFile(p string, data []byte, mode os.FileMode) error {
	if !path.IsAbs(p) {
		return fmt.Errorf("vm %s: %q: want an absolute path inside the VM", v.name, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), vmFileTimeout)
	defer cancel()
	m := fmt.Sprintf("%04o", mode.Perm())
	if _, _, err := v.runIn(ctx, bytes.NewReader(data), "sh", "-c", `cat > "$1" && chmod "$2" "$1"`, "sh", p, m); err != nil {
		return fmt.Errorf("vm %s: write %s: %w", v.name, p, err)
	}
	return nil
}
