package harness

// The project's binaries, built fresh once per test process so a system
// test never runs a stale flockctl.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const modulePath = "github.com/flockrun/flock"

// binaryPackages are built and installed into /usr/local/bin under their
// last path element.
var binaryPackages = []string{"./cmd/flockctl", "./cmd/flock-agent", "./test/probe", "./test/floor"}

var build struct {
	once sync.Once
	bins map[string]string
	err  error
}

// projectBinaries returns name -> host path of the built binaries. A build
// failure is reported to every Start of the process, with go's output.
func projectBinaries() (map[string]string, error) {
	build.once.Do(func() { build.bins, build.err = buildBinaries() })
	if build.err != nil {
		return nil, build.err
	}
	bins := map[string]string{}
	for k, v := range build.bins {
		bins[k] = v
	}
	return bins, nil
}

func buildBinaries() (map[string]string, error) {
	// Under the harness's parent, so the sweep removes it once this
	// process is gone.
	dir := filepath.Join(parentDir, fmt.Sprintf("build-%d", os.Getpid()))
	if err := machineDirs.claim(dir, func(string, ...any) {}); err != nil {
		return nil, err
	}
	if err := goBuild(dir, nil, binaryPackages); err != nil {
		return nil, err
	}
	bins := map[string]string{}
	for _, p := range binaryPackages {
		name := filepath.Base(p)
		bins[name] = filepath.Join(dir, name)
	}
	return bins, nil
}

// BinDir is the directory of the project's binaries (flockctl,
// flock-agent, probe, floor), built once per test process.
func BinDir(t testing.TB) string {
	t.Helper()
	bins, err := projectBinaries()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(bins["flockctl"])
}

// Build builds packages (./cmd/flockctl, ...) with go build's flags into
// a new directory of t's, as BinDir's are built, and returns it.
func Build(t testing.TB, flags []string, packages ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := goBuild(dir, flags, packages); err != nil {
		t.Fatal(err)
	}
	return dir
}

// goBuild builds packages with flags into dir, as make build does.
func goBuild(dir string, flags, packages []string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("build the project's binaries: %w", err)
	}
	argv := append(append(append([]string{"build"}, flags...), "-o", dir+"/"), packages...)
	cmd := exec.Command(goBin, argv...)
	cmd.Dir = root
	// Static: probe and flock-agent also run inside the agents'
	// containers, on a busybox root file system with no libc.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build the project's binaries: cd %s && go %s: %w\n%s", root, strings.Join(argv, " "), err, out.String())
	}
	return nil
}

// InRepo is a path in the repository, found from the working directory
// up (a test runs in its package's directory).
func InRepo(t testing.TB, elem ...string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// moduleRoot finds the directory of flock's go.mod from the working
// directory up (a test runs in its package's directory, the demo from the
// repository).
func moduleRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && declaresModule(b, modulePath) {
			return d, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("no go.mod of module %s in %s or above", modulePath, wd)
		}
	}
}

func declaresModule(gomod []byte, path string) bool {
	for _, l := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == path {
			return true
		}
	}
	return false
}
