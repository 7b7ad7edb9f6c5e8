package harness

// A fresh machine, for the check that the project's own files install
// everything its tests need: Debian 12 as debootstrap makes it from the
// host's mirror (minbase: the essential packages and apt), with the host's
// Go bound in and nothing else. The tree is built once per recipe into
// /var/cache/flock-fresh/<hash>/tree (cache.go) and never written after:
// every run gets a throw-away overlay over it (nspawn --volatile=overlay).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

const freshCacheDir = "/var/cache/flock-fresh"

// localCAs is where Debian keeps the certificates an administrator adds.
const localCAs = "/usr/local/share/ca-certificates"

// freshRecipeVersion changes the tree's hash when its build changes.
const freshRecipeVersion = "1"

// freshTree returns the cached fresh tree, building it first if needed.
// The host's apt settings are part of its recipe: the tree's apt uses the
// host's mirror and proxy, as a new machine beside the host would.
func freshTree(logf func(string, ...any)) (string, error) {
	apt, err := hostAptConfig()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("version %s\nsuite %s\nmirror %s\nconf\n%s", freshRecipeVersion, vmSuite, apt.Mirror, apt.Conf)))
	dir, err := cachedBuild(freshCacheDir, hex.EncodeToString(sum[:]), "fresh tree", func(dir string) error {
		logf("fresh tree: debootstrap --variant=minbase %s from %s (a minute or two, once)", vmSuite, apt)
		tree := filepath.Join(dir, "tree")
		// Its own mount and PID namespaces: debootstrap's mounts in the
		// tree die with it, even if it is killed.
		if err := runLogged(filepath.Join(dir, "build.log"), apt.Env, "unshare", "--mount", "--propagation", "private",
			"--pid", "--fork", "--kill-child", "--", "debootstrap", "--variant=minbase", vmSuite, tree, apt.Mirror); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(tree, "etc/apt/apt.conf.d/00flock-host"), []byte(apt.Conf), 0o644); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "mirror"), []byte(apt.String()+"\n"), 0o644)
	}, logf)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "tree"), nil
}

// FreshOptions says what to run on a fresh machine.
type FreshOptions struct {
	// Src is a directory copied to /root/src in the machine, where Argv
	// runs: only the files git tracks or would track (no bin/, no
	// caches), as a clone has them.
	Src  string
	Argv []string
	// Out receives what Argv prints.
	Out io.Writer
	// Log receives the harness's progress lines; nil discards them.
	Log io.Writer
}

// RunFresh runs o.Argv as root on a fresh machine: a container of the
// fresh tree (not booted; the host's network, so apt and the Go module
// proxy are reached as from a new machine), its root a tmpfs overlay so
// nothing it installs outlives it. The host's Go is bound in read-only,
// and its module and build caches read-write: they hold downloads and
// compiled objects, never an installed program, so they only save time.
// Downloaded .debs are kept between runs in the cache for the same reason.
func RunFresh(ctx context.Context, o FreshOptions) error {
	logf := func(format string, a ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", a...)
		}
	}
	nspawn, err := exec.LookPath("systemd-nspawn")
	if err != nil {
		return fmt.Errorf("%w (apt-get install systemd-container)", err)
	}
	tree, err := freshTree(logf)
	if err != nil {
		return err
	}
	work := filepath.Join(parentDir, fmt.Sprintf("fresh-%d-%d", os.Getpid(), seq.Add(1)))
	if err := machineDirs.claim(work, logf); err != nil {
		return err
	}
	defer func() {
		if err := removeDir(work); err != nil {
			logf("fresh: %v", err)
		}
	}()
	src := filepath.Join(work, "src")
	if err := copyTracked(o.Src, src); err != nil {
		return err
	}
	debs := filepath.Join(freshCacheDir, ".debs") // not an entry: pruneUnused skips dot names
	if err := os.MkdirAll(filepath.Join(debs, "partial"), 0o755); err != nil {
		return err
	}
	goroot, gocaches, goenv, err := hostGo()
	if err != nil {
		return err
	}
	argv := []string{"-D", tree, "--volatile=overlay", "--register=no", "--keep-unit", "--quiet", "--as-pid2",
		"-M", filepath.Base(work), "--resolv-conf=copy-host", "--timezone=off",
		"--bind-ro=" + goroot, "--bind=" + src + ":/root/src", "--bind=" + debs + ":/var/cache/apt/archives",
		// A real machine's root has it, and a machine booted inside (the
		// demo's) needs it to set up its own firewall; nspawn drops it
		// from a container on the host's network unless asked.
		"--capability=CAP_NET_ADMIN",
		"--system-call-filter=" + allowedSyscalls,
		"--chdir=/root/src", "--setenv=PATH=" + goroot + "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for _, d := range gocaches {
		argv = append(argv, "--bind="+d)
	}
	// The host's own trust anchors (a TLS-inspecting proxy's CA, a
	// company CA), as a new machine on the same network has them;
	// ca-certificates adds them when make deps installs it.
	if _, err := os.Stat(localCAs); err == nil {
		cas := filepath.Join(work, "ca-certificates")
		if err := os.CopyFS(cas, os.DirFS(localCAs)); err != nil {
			return fmt.Errorf("copy %s: %w", localCAs, err)
		}
		argv = append(argv, "--bind="+cas+":"+localCAs)
	}
	// /var/tmp on the host's disk, as a real machine has it: the root is
	// an overlay on a tmpfs, where an overlay of its own (a machine the
	// demo boots) cannot have its upper dir.
	vartmp := filepath.Join(work, "var-tmp")
	if err := os.Mkdir(vartmp, 0o1777); err != nil {
		return err
	}
	argv = append(argv, "--bind="+vartmp+":/var/tmp")
	for _, kv := range goenv { // the Go set-up the README asks for
		argv = append(argv, "--setenv="+kv)
	}
	argv = append(append(argv, "--"), o.Argv...)
	cmd := exec.CommandContext(ctx, nspawn, argv...)
	cmd.Stdout, cmd.Stderr = o.Out, o.Out
	cmd.WaitDelay = 10 * time.Second
	t0 := time.Now()
	logf("fresh: %s in %s", strings.Join(o.Argv, " "), tree)
	// The pid file is for the sweep (workdir.go): the dir is stale once
	// nspawn is gone.
	tc, err := startTied(cmd, filepath.Join(work, nspawnFile))
	if err != nil {
		return err
	}
	<-tc.done
	logf("fresh: done in %v: %v", time.Since(t0).Round(time.Second), tc.waitErr)
	if tc.waitErr != nil {
		return fmt.Errorf("fresh machine: %s: %w", strings.Join(o.Argv, " "), tc.waitErr)
	}
	return nil
}

// hostGo is the Go the README asks for: its root, its caches and its
// GO* settings.
func hostGo() (goroot string, caches, env []string, err error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", nil, nil, fmt.Errorf("go: %w (Go 1.26 on PATH, as the README says)", err)
	}
	out, err := exec.Command(goBin, "env", "GOROOT", "GOMODCACHE", "GOCACHE").Output()
	if err != nil {
		return "", nil, nil, fmt.Errorf("go env: %w", err)
	}
	f := strings.Fields(string(out))
	if len(f) != 3 {
		return "", nil, nil, fmt.Errorf("go env GOROOT GOMODCACHE GOCACHE: %q", out)
	}
	for _, d := range f[1:] {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", nil, nil, err
		}
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GO") {
			env = append(env, kv)
		}
	}
	return f[0], f[1:], append(env, "GOMODCACHE="+f[1], "GOCACHE="+f[2]), nil
}

// copyTracked copies the files git tracks in src, and those it would
// track (untracked, not ignored), to dst.
func copyTracked(src, dst string) error {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = src
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git ls-files in %s: %w", src, err)
	}
	for _, rel := range bytes.Split(bytes.TrimRight(out, "\x00"), []byte{0}) {
		from, to := filepath.Join(src, string(rel)), filepath.Join(dst, string(rel))
		fi, err := os.Lstat(from)
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet in git
		}
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(from)
			if err == nil {
				err = os.Symlink(target, to)
			}
			if err != nil {
				return err
			}
			continue
		}
		if err := CopyFile(from, to, fi.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}
