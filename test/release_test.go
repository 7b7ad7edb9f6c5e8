package test

// Tier: package (make release: Go, and nfpm and go-licenses through the Go
// module proxy; dpkg-deb). What a tag publishes, built twice.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flockrun/flock/internal/version"
	"github.com/flockrun/flock/packaging/sbom"
	"github.com/flockrun/flock/test/harness"
)

// TestReleaseReproducible runs make release twice, into two directories,
// and requires the same SHA256SUMS of the same files: one commit, the same
// bytes. Then each architecture's files hold what docs/install.md says:
// the package of that architecture, a tarball whose programs are built
// for it with their man pages and completions, and an SBOM that names the
// tarball's programs by their digest. The second build finds Go's cache
// warm; what it proves reproducible is all the packing after the
// compiler, and the compiler's output given the same flags.
func TestReleaseReproducible(t *testing.T) {
	harness.PackageTier.Require(t)
	if testing.Short() {
		t.Skip("builds the release twice (a few minutes): not with -short")
	}
	env := os.Environ()
	if os.Getenv("SOURCE_DATE_EPOCH") == "" {
		// A clean tree's builds take the commit's time; a dirty tree's would
		// take the clock's, once per make release. The commit's for both.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := harness.RunInRepo(ctx, env, "git", "log", "-1", "--format=%ct", "HEAD")
		cancel()
		if err != nil {
			t.Fatalf("the commit's time: %v\n%s", err, out)
		}
		env = append(env, "SOURCE_DATE_EPOCH="+strings.TrimSpace(out))
	}
	var dirs []string
	for i := range 2 {
		dir := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		t0 := time.Now()
		out, err := harness.RunInRepo(ctx, env, "make", "--no-print-directory", "release", "RELEASE_DIR="+dir)
		cancel()
		if err != nil {
			t.Fatalf("make release (build %d): %v\n%s", i+1, err, out)
		}
		t.Logf("make release (build %d): %v", i+1, time.Since(t0).Round(time.Second))
		dirs = append(dirs, dir)
	}

	sums := checkSums(t, dirs[0])
	if again := checkSums(t, dirs[1]); !maps.Equal(sums, again) {
		for name, sum := range sums {
			if again[name] != sum {
				t.Errorf("%s: two builds of one commit differ (%s, %s)", name, sum, again[name])
			}
		}
		for name := range again {
			if _, ok := sums[name]; !ok {
				t.Errorf("%s: only the second build wrote it", name)
			}
		}
	}

	debs, _ := filepath.Glob(filepath.Join(dirs[0], "flock_*_amd64.deb"))
	if len(debs) != 1 {
		t.Fatalf("make release wrote %q, want one flock_*_amd64.deb", debs)
	}
	v, err := harness.DebField(debs[0], "Version")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"SHA256SUMS"}
	for _, arch := range []string{"amd64", "arm64"} {
		want = append(want, "flock_"+v+"_"+arch+".deb", "flock_"+v+"_linux_"+arch+".tar.gz", "flock_"+v+"_linux_"+arch+".cdx.json")
	}
	var got []string
	for name := range sums {
		got = append(got, name)
	}
	got = append(got, "SHA256SUMS")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("make release wrote\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}

	for _, tc := range []struct{ arch, machine string }{
		{"amd64", elf.EM_X86_64.String()},
		{"arm64", elf.EM_AARCH64.String()},
	} {
		t.Run(tc.arch, func(t *testing.T) {
			deb := filepath.Join(dirs[0], "flock_"+v+"_"+tc.arch+".deb")
			if a, err := harness.DebField(deb, "Architecture"); err != nil || a != tc.arch {
				t.Errorf("%s: Architecture %q (%v), want %s", filepath.Base(deb), a, err, tc.arch)
			}
			top := "flock_" + v + "_linux_" + tc.arch
			files := tarFiles(t, filepath.Join(dirs[0], top+".tar.gz"))
			for _, name := range []string{"bin/flockctl", "bin/flock-agent", "share/man/man1/flockctl.1.gz", "share/man/man1/flock-agent.1.gz",
				"share/bash-completion/completions/flockctl", "share/zsh/site-functions/_flockctl",
				"share/doc/flock/LICENSE", "share/doc/flock/licenses/report.csv"} {
				if _, ok := files[top+"/"+name]; !ok {
					t.Errorf("%s.tar.gz has no %s/%s", top, top, name)
				}
			}
			b, err := os.ReadFile(filepath.Join(dirs[0], top+".cdx.json"))
			if err != nil {
				t.Fatal(err)
			}
			bom, err := sbom.Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if bom.Metadata.Component.Version != v || !slices.Contains(bom.Metadata.Properties, sbom.Property{Name: "go:target", Value: "linux/" + tc.arch}) {
				t.Errorf("%s.cdx.json: metadata %+v, want version %s for linux/%s", top, bom.Metadata, v, tc.arch)
			}
			for _, prog := range []string{"flockctl", "flock-agent"} {
				bin := files[top+"/bin/"+prog]
				if f, err := elf.NewFile(bytes.NewReader(bin)); err != nil || f.Machine.String() != tc.machine {
					t.Errorf("%s.tar.gz: bin/%s is not an ELF program for %s (%v)", top, prog, tc.machine, err)
				}
				sum := sha256.Sum256(bin)
				if !bomNames(bom, "program:"+prog, hex.EncodeToString(sum[:])) {
					t.Errorf("%s.cdx.json names no program %s of the tarball's digest", top, prog)
				}
			}
			if !slices.ContainsFunc(bom.Components, func(c sbom.Component) bool {
				return strings.HasPrefix(c.PURL, "pkg:golang/github.com/nats-io/nats-server/v2@v")
			}) {
				t.Errorf("%s.cdx.json names no nats-server module", top)
			}
			if tc.arch == runtime.GOARCH {
				flockctlSaysVersion(t, files[top+"/bin/flockctl"], v)
			}
		})
	}
}

// checkSums is dir's SHA256SUMS, name → digest, after checking each
// digest against its file (what `sha256sum -c` does for the one who
// downloads them).
func checkSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS: line %q is not \"DIGEST  NAME\"", sc.Text())
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != sum {
			t.Errorf("SHA256SUMS: %s is not %s", name, sum)
		}
		sums[name] = sum
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sums
}

// tarFiles is every regular file of a .tar.gz, path → content.
func tarFiles(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: %s is owned by %d:%d, want 0:0", path, h.Name, h.Uid, h.Gid)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatalf("%s: %s: %v", path, h.Name, err)
			}
			files[h.Name] = b
		}
	}
}

// bomNames says whether bom has the component ref with the SHA-256 sum.
func bomNames(bom sbom.BOM, ref, sum string) bool {
	return slices.ContainsFunc(bom.Components, func(c sbom.Component) bool {
		return c.BOMRef == ref && slices.Contains(c.Hashes, sbom.Hash{Alg: "SHA-256", Content: sum})
	})
}

// flockctlSaysVersion runs the tarball's flockctl (built for this
// machine) and requires the release's version of `flockctl version`.
func flockctlSaysVersion(t *testing.T, bin []byte, want string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "flockctl")
	if err := os.WriteFile(p, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(p, "version", "--output", "json").Output()
	if err != nil {
		t.Fatalf("%s version: %v", p, err)
	}
	var in version.Info
	if err := json.Unmarshal(out, &in); err != nil {
		t.Fatalf("%s version --output json: %v\n%s", p, err, out)
	}
	if in.Version != want {
		t.Errorf("the release's flockctl says version %q, want %q", in.Version, want)
	}
	if len(in.Commit) < 40 {
		t.Errorf("the release's flockctl names no commit: %+v", in)
	}
}
