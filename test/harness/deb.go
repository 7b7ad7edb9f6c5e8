package harness

// The Debian package, built by make deb as CI and an operator build it.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type debOnce struct {
	once sync.Once
	path string
	err  error
}

var debBuild, nextBuild debOnce

// Deb is the package make deb builds from this checkout (built once per
// test process, under the harness's directory).
func Deb(t testing.TB) string {
	t.Helper()
	debBuild.once.Do(func() {
		dir := filepath.Join(parentDir, fmt.Sprintf("deb-%d", os.Getpid()))
		if err := machineDirs.claim(dir, func(string, ...any) {}); err != nil {
			debBuild.err = err
			return
		}
		debBuild.path, debBuild.err = BuildDeb(dir)
	})
	if debBuild.err != nil {
		t.Fatal(debBuild.err)
	}
	return debBuild.path
}

// NextDeb is the package of the release after Deb's: the same source
// built as version Deb's+"+next", which dpkg sorts after it, so every
// program in it is another build (the version is linked in, and so the
// build id differs). Built once per test process.
func NextDeb(t testing.TB) string {
	t.Helper()
	deb := Deb(t)
	nextBuild.once.Do(func() {
		v, err := DebField(deb, "Version")
		if err != nil {
			nextBuild.err = err
			return
		}
		dir := filepath.Join(parentDir, fmt.Sprintf("deb-next-%d", os.Getpid()))
		if err := machineDirs.claim(dir, func(string, ...any) {}); err != nil {
			nextBuild.err = err
			return
		}
		nextBuild.path, nextBuild.err = BuildDeb(dir, "VERSION="+v+"+next")
	})
	if nextBuild.err != nil {
		t.Fatal(nextBuild.err)
	}
	return nextBuild.path
}

// BuildDeb runs make deb DEBDIR=dir and more make variables (VERSION=...),
// and returns the one package it wrote there.
func BuildDeb(dir string, vars ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	before, _ := filepath.Glob(filepath.Join(dir, "flock_*.deb"))
	for _, p := range before {
		if err := os.Remove(p); err != nil {
			return "", err
		}
	}
	out, err := RunInRepo(ctx, os.Environ(), append([]string{"make", "--no-print-directory", "deb", "DEBDIR=" + dir}, vars...)...)
	if err != nil {
		return "", fmt.Errorf("%w\n%s", err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(dir, "flock_*_amd64.deb"))
	if len(debs) != 1 {
		return "", fmt.Errorf("make deb DEBDIR=%s wrote %q, want one flock_*_amd64.deb\n%s", dir, debs, out)
	}
	return debs[0], nil
}

// DebField is one field of a package's control file (dpkg-deb --field).
func DebField(deb, field string) (string, error) {
	out, err := exec.Command("dpkg-deb", "--field", deb, field).Output()
	if err != nil {
		return "", fmt.Errorf("dpkg-deb --field %s %s: %w", deb, field, err)
	}
	return strings.TrimSpace(string(out)), nil
}

var releaseBuild debOnce

// Release is the directory make release writes for amd64 alone
// (RELEASE_ARCHES=amd64): the package, the tarball, the SBOM and
// SHA256SUMS a tag publishes, as an operator downloads them (built once
// per test process). path is the directory.
func Release(t testing.TB) string {
	t.Helper()
	releaseBuild.once.Do(func() {
		dir := filepath.Join(parentDir, fmt.Sprintf("release-%d", os.Getpid()))
		if err := machineDirs.claim(dir, func(string, ...any) {}); err != nil {
			releaseBuild.err = err
			return
		}
		out := filepath.Join(dir, "release")
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		if b, err := RunInRepo(ctx, os.Environ(), "make", "--no-print-directory", "release", "RELEASE_ARCHES=amd64", "RELEASE_DIR="+out); err != nil {
			releaseBuild.err = fmt.Errorf("make release RELEASE_ARCHES=amd64: %w\n%s", err, b)
			return
		}
		releaseBuild.path = out
	})
	if releaseBuild.err != nil {
		t.Fatal(releaseBuild.err)
	}
	return releaseBuild.path
}
